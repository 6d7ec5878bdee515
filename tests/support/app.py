"""Helpers for the app integration tests (test_app_*.py): settings on a fresh SQLite file, tenants via the admin API."""

from __future__ import annotations

import json
import time
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import select

from gateway.db.models import RequestLog
from gateway.main import create_app
from gateway.settings import Settings

ADMIN_KEY = "sk-test-admin"
QUESTION = "What is the capital of France?"
SYSTEM = "You are a helpful assistant. Answer in one short sentence."


def make_settings(tmp_path: Path, **overrides) -> Settings:
    return Settings(db_url=f"sqlite:///{tmp_path / 'app.db'}", admin_key=ADMIN_KEY, rewarm_pins=False, **overrides)


def make_client(tmp_path: Path, engine) -> TestClient:
    """A TestClient on a fresh app over tmp_path/app.db with `engine` injected; `with` it to run the lifespan."""
    return TestClient(create_app(make_settings(tmp_path), engine=engine))


def admin_headers() -> dict:
    return {"Authorization": f"Bearer {ADMIN_KEY}"}


def create_tenant(client, name: str, **fields) -> dict:
    """Create a tenant; returns {"id", "name", "key", "headers"}."""
    response = client.post("/admin/tenants", json={"name": name, **fields}, headers=admin_headers())
    assert response.status_code == 201, response.text
    body = response.json()
    key = body["api_key"]["key"]
    return {"id": body["id"], "name": name, "key": key, "headers": {"Authorization": f"Bearer {key}"}}


def chat_body(question: str = QUESTION, **fields) -> dict:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    return {"model": "default", "messages": messages, "max_tokens": 12, "temperature": 0, **fields}


def sse_payloads(lines) -> list:
    """The JSON payloads of an SSE body (the final [DONE] as the string "[DONE]"); asserts the framing."""
    payloads = []
    for line in lines:
        if not line:
            continue
        assert line.startswith("data: "), line
        data = line[len("data: "):]
        payloads.append(data if data == "[DONE]" else json.loads(data))
    return payloads


def wait_for_log_rows(gw, num_rows: int, timeout_s: float = 10.0) -> list[RequestLog]:
    """The request-log rows, once at least `num_rows` have been written by the LogWriter."""
    deadline = time.monotonic() + timeout_s
    while True:
        with gw.session_factory() as session:
            rows = list(session.scalars(select(RequestLog).order_by(RequestLog.created_at)))
        if len(rows) >= num_rows or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)
