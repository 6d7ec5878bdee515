"""The queue deadline through the app: a request not scheduled in time gets 503 + Retry-After, streams too,
and leaves nothing behind (no KV pages, no tenant slot), while the request that held the engine completes."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from engine import Engine, EngineConfig
from gateway.main import create_app
from tests.support.app import chat_body, make_settings, sse_payloads, wait_for_log_rows

pytestmark = pytest.mark.slow


@pytest.fixture
def one_slot_engine(runners):
    """The default model with ONE running slot, so every request behind a running one queues."""
    runner = runners(256, 16)
    engine = Engine(EngineConfig(page_size=16, num_pages=256, max_running=1, device="cpu"), runner=runner).start()
    yield engine
    engine.shutdown()


async def post_chat(client: httpx.AsyncClient, body: dict, headers: dict) -> httpx.Response:
    if not body.get("stream"):
        return await client.post("/v1/chat/completions", json=body, headers=headers)
    async with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as response:
        await response.aread()
        return response


async def test_requests_past_their_queue_deadline_get_503_with_retry_after_and_leak_nothing(tmp_path, one_slot_engine):
    engine = one_slot_engine
    app = create_app(make_settings(tmp_path), engine=engine)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=120) as client:
            made = await client.post("/admin/tenants", json={"name": "queued"},
                                     headers={"Authorization": "Bearer sk-test-admin"})
            tenant_id, key = made.json()["id"], made.json()["api_key"]["key"]
            headers = {"Authorization": f"Bearer {key}"}
            invalid = await client.post("/v1/chat/completions", json=chat_body(queue_timeout_s=0), headers=headers)
            assert invalid.status_code == 400 and invalid.json()["error"]["param"] == "queue_timeout_s"
            blocker = asyncio.create_task(post_chat(
                client, chat_body("Count from one to fifty.", max_tokens=48, stream=True), headers))
            while engine.stats()["num_running"] == 0:  # until the blocker holds the only slot
                assert not blocker.done(), blocker.result().text
                await asyncio.sleep(0.01)
            late = [chat_body(f"Question {i}?", queue_timeout_s=0.05, stream=i % 2 == 1) for i in range(4)]
            refused = await asyncio.gather(*(post_chat(client, body, headers) for body in late))
            finished = await blocker
            assert finished.status_code == 200 and sse_payloads(finished.text.splitlines())[-1] == "[DONE]"
            for response in refused:
                assert response.status_code == 503, response.text
                assert int(response.headers["retry-after"]) >= 1
                error = response.json()["error"]
                assert (error["type"], error["code"]) == ("server_overloaded", "queue_timeout")
            assert engine.stats()["num_queue_timeouts"] == 4
            assert app.state.gw.tenant_limits.num_active(tenant_id) == 0
            rows = wait_for_log_rows(app.state.gw, 5)  # the 400 is refused before a run starts: no row
            assert sorted(row.error_code or "ok" for row in rows) == ["ok"] + ["queue_timeout"] * 4
    engine.flush_cache()
    assert engine.pool.num_free_pages == engine.pool.num_pages, "pages leaked"

