"""However the client leaves, a run gives back its tenant slot and leaves exactly one log row.

The ASGI app is driven directly (its lifespan entered by hand) with a `send` that raises at
one point of the response — at the headers, at the first body chunk, at the last one — or a
`receive` that reports http.disconnect as soon as the body is read; for chat completions and
Responses, streaming and not. After each request: the tenant holds no slot, the engine runs
nothing, and the request-log writer has written one more row (counted at the writer, so a run
recorded twice would show even though the database keeps one row per id)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from sqlalchemy import func, select

from gateway.db.models import RequestLog
from gateway.main import create_app
from tests.support.app import ADMIN_KEY, chat_body, make_settings

pytestmark = pytest.mark.slow

FAIL_POINTS = ("none", "headers", "first-chunk", "last-chunk", "disconnect")


class ClientLeft(OSError):
    pass


def scope_for(path: str, key: str) -> dict:
    return {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
        "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "client": ("127.0.0.1", 50000), "server": ("testserver", 80),
        "headers": [(b"content-type", b"application/json"), (b"authorization", f"Bearer {key}".encode()),
                    (b"host", b"testserver")],
    }


async def call(app, path: str, key: str, body: dict, fail_at: str) -> list[dict]:
    """Run one request through the ASGI app; returns the messages `send` accepted."""
    payload = json.dumps(body).encode()
    body_sent, messages = False, []

    async def receive() -> dict:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": payload, "more_body": False}
        if fail_at == "disconnect":
            return {"type": "http.disconnect"}
        await asyncio.Event().wait()  # the client stays until the response ends

    async def send(message: dict) -> None:
        is_body = message["type"] == "http.response.body"
        if fail_at == "headers" and message["type"] == "http.response.start":
            raise ClientLeft("client left before the headers")
        if fail_at == "first-chunk" and is_body:
            raise ClientLeft("client left at the first chunk")
        if fail_at == "last-chunk" and is_body and not message.get("more_body", False):
            raise ClientLeft("client left at the last chunk")
        messages.append(message)

    try:
        await app(scope_for(path, key), receive, send)
    except Exception:  # what a server does with a send that raised: drop the connection
        pass
    return messages


async def admin_create_tenant(app) -> tuple[int, str]:
    messages = await call_admin(app, {"name": "leaver", "max_concurrency": 2})
    created = json.loads(b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body"))
    return created["id"], created["api_key"]["key"]


async def call_admin(app, body: dict) -> list[dict]:
    return await call(app, "/admin/tenants", ADMIN_KEY, body, "none")


def request_body(path: str, stream: bool) -> dict:
    if path == "/v1/chat/completions":
        return chat_body(max_tokens=4, stream=stream, stream_options={"include_usage": True} if stream else None)
    return {"model": "default", "input": "What is the capital of France?", "max_output_tokens": 4, "stream": stream}


async def settle(gw, num_rows: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if gw.log_writer.num_written >= num_rows and gw.engine.stats()["num_running"] == 0:
            return
        await asyncio.sleep(0.05)


def test_slot_and_log_row_are_released_once_however_the_client_leaves(tmp_path, engine):
    async def scenario() -> list[tuple]:
        app = create_app(make_settings(tmp_path, canonical_shadow=False, log_flush_interval_s=0.05), engine=engine)
        async with app.router.lifespan_context(app):
            gw = app.state.gw
            tenant_id, key = await admin_create_tenant(app)
            outcomes = []
            for path in ("/v1/chat/completions", "/v1/responses"):
                for stream in (True, False):
                    for fail_at in FAIL_POINTS:
                        await call(app, path, key, request_body(path, stream), fail_at)
                        await settle(gw, len(outcomes) + 1)
                        outcomes.append((path, stream, fail_at, gw.tenant_limits.num_active(tenant_id),
                                         gw.log_writer.num_written, gw.engine.stats()["num_running"]))
            with gw.session_factory() as session:
                num_rows = session.scalar(select(func.count(RequestLog.id)).where(RequestLog.tenant_id == tenant_id))
            await asyncio.sleep(0.3)  # a late second record would land here
            outcomes.append(("rows", num_rows, gw.log_writer.num_written))
            return outcomes

    outcomes = asyncio.run(scenario())
    expected = [(path, stream, fail_at, 0, i + 1, 0) for i, (path, stream, fail_at) in enumerate(
        (p, s, f) for p in ("/v1/chat/completions", "/v1/responses") for s in (True, False) for f in FAIL_POINTS)]
    num_runs = len(expected)
    assert outcomes == [*expected, ("rows", num_runs, num_runs)]
