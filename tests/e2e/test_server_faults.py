"""Faults on a real `radixgate serve` process: kill -9 mid-load and restart loses no acknowledged
request's log row (the spool is replayed at start, each row once), and SIGTERM lets an open stream
finish with [DONE] before the process exits (uvicorn's graceful shutdown, shutdown_timeout_s)."""

from __future__ import annotations

import json
import signal
import sqlite3
import threading
import time
import uuid

import httpx
import pytest

from tests.e2e.conftest import GatewayServer
from tests.support.server_process import RADIXGATE

pytestmark = pytest.mark.slow

ENV = {"RADIXGATE_ENGINE__KV_CACHE_TOKENS": "8192", "RADIXGATE_ENGINE__DEVICE": "cpu",
       "RADIXGATE_SHUTDOWN_TIMEOUT_S": "60", "RADIXGATE_LOG_FLUSH_INTERVAL_S": "3600"}  # rows reach the database only from the spool
NUM_CLIENTS = 3
START_TIMEOUT_S = 600  # two cold starts of the model on a busy CI host


def body(index: int, stream: bool, max_tokens: int = 4) -> dict:
    return {"model": "default", "max_tokens": max_tokens, "temperature": 0, "stream": stream,
            "messages": [{"role": "system", "content": "You are a terse assistant."},
                         {"role": "user", "content": f"Say the number {index}."}]}


def acknowledged_ids(url: str, key: str, stop: threading.Event, out: list[str], offset: int) -> None:
    """Send requests until the server dies; append the id of every one answered in full (200; a stream to [DONE])."""
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, timeout=60) as client:
        for index in range(offset, offset + 10_000):
            if stop.is_set():
                return
            try:
                if index % 2:
                    response = client.post("/v1/chat/completions", json=body(index, False), headers=headers)
                    if response.status_code == 200:
                        out.append(response.json()["id"])
                    continue
                with client.stream("POST", "/v1/chat/completions", json=body(index, True), headers=headers) as response:
                    lines = [line for line in response.iter_lines() if line.startswith("data: ")]
                if response.status_code == 200 and lines and lines[-1] == "data: [DONE]":
                    out.append(json.loads(lines[0][len("data: "):])["id"])
            except httpx.HTTPError:
                return


def stored_ids(db_path) -> set[str]:
    with sqlite3.connect(db_path) as connection:
        return {row[0] for row in connection.execute("SELECT id FROM request_log")}


def row_ids(completion_ids: list[str]) -> set[str]:
    """request_log ids as SQLite stores a Uuid column (32 hex digits) for the completions' ids."""
    return {uuid.UUID(hex=cid.rsplit("-", 1)[-1]).hex for cid in completion_ids}


def wait_until(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_kill_9_mid_load_then_restart_keeps_every_acknowledged_row_and_sigterm_drains_a_stream(tmp_path):
    server = GatewayServer(env=ENV, workdir=tmp_path, command=[str(RADIXGATE)]).start(START_TIMEOUT_S)
    try:
        key = server.create_tenant()["api_key"]["key"]
        done, stop = [], threading.Event()
        threads = [threading.Thread(target=acknowledged_ids, args=(server.url, key, stop, done, 1000 * i))
                   for i in range(NUM_CLIENTS)]
        for thread in threads:
            thread.start()
        assert wait_until(lambda: len(done) >= 6, 120), server.log_tail()
        server.send_signal(signal.SIGKILL)  # no batch was due yet: every row is in the spool only
        server.wait(30)
        stop.set()
        for thread in threads:
            thread.join(60)
        acknowledged = row_ids(done)
        assert not acknowledged & stored_ids(tmp_path / "radixgate.db")
    finally:
        server.stop()

    restarted = GatewayServer(env={**ENV, "RADIXGATE_ADMIN_KEY": server.admin_key}, workdir=tmp_path,
                              command=[str(RADIXGATE)]).start(START_TIMEOUT_S)
    try:
        assert wait_until(lambda: acknowledged <= stored_ids(tmp_path / "radixgate.db"), 60), (
            sorted(acknowledged - stored_ids(tmp_path / "radixgate.db")), restarted.log_tail())
        with sqlite3.connect(tmp_path / "radixgate.db") as connection:
            num_rows, num_ids = connection.execute("SELECT count(id), count(DISTINCT id) FROM request_log").fetchone()
        assert num_rows == num_ids

        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=restarted.url, timeout=120) as client:
            with client.stream("POST", "/v1/chat/completions", json=body(7, True, max_tokens=48), headers=headers) as response:
                assert response.status_code == 200
                lines = response.iter_lines()
                first = next(line for line in lines if line.startswith("data: "))
                restarted.send_signal(signal.SIGTERM)
                rest = [line for line in lines if line.startswith("data: ")]
        assert first and rest[-1] == "data: [DONE]"
        assert restarted.wait(90) == 0
    finally:
        restarted.stop()
