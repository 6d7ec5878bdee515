"""Commit before acknowledge, on the real server: a key is usable the moment its 201 arrives.

200 times, while other tenants stream chat completions and other keys are issued beside it,
a fresh tenant (or a fresh key for an existing one) is created and used at once.
"""

from __future__ import annotations

import threading
import uuid

import httpx
import pytest

pytestmark = pytest.mark.slow

NUM_ROUNDS = 200
CHAT = {"model": "default", "messages": [{"role": "user", "content": "Count to three."}], "max_tokens": 8,
        "temperature": 0, "stream": True}


def load(base_url: str, admin: dict, key: str, stop: threading.Event, errors: list) -> None:
    """Stream chats and issue keys until `stop`; any 5xx is recorded."""
    with httpx.Client(base_url=base_url, timeout=60) as client:
        while not stop.is_set():
            with client.stream("POST", "/v1/chat/completions", json=CHAT, headers={"Authorization": f"Bearer {key}"}) as r:
                r.read()
                if r.status_code >= 500:
                    errors.append(r.status_code)
            issued = client.post("/admin/tenants", json={"name": f"t-load-{uuid.uuid4().hex[:10]}"}, headers=admin)
            if issued.status_code >= 500:
                errors.append(issued.status_code)


def test_a_key_issued_under_load_works_on_its_first_use_200_times(gateway_server):
    admin = {"Authorization": f"Bearer {gateway_server.admin_key}"}
    load_keys = [gateway_server.create_tenant()["api_key"]["key"] for _ in range(3)]
    stop, load_errors = threading.Event(), []
    workers = [threading.Thread(target=load, args=(gateway_server.url, admin, key, stop, load_errors)) for key in load_keys]
    for worker in workers:
        worker.start()
    first_uses = []
    try:
        with httpx.Client(base_url=gateway_server.url, timeout=60) as client:
            tenant = gateway_server.create_tenant()["name"]
            for round_ in range(NUM_ROUNDS):
                if round_ % 2:
                    issued = client.post(f"/admin/tenants/{tenant}/keys", headers=admin)
                    key = issued.json().get("key")
                else:
                    issued = client.post("/admin/tenants", json={"name": f"t-{uuid.uuid4().hex[:10]}"}, headers=admin)
                    key = issued.json().get("api_key", {}).get("key")
                assert issued.status_code == 201, issued.text
                used = client.get("/v1/models", headers={"Authorization": f"Bearer {key}"})
                first_uses.append(used.status_code)
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=120)
    assert first_uses == [200] * NUM_ROUNDS, {status: first_uses.count(status) for status in set(first_uses)}
    assert load_errors == []
