"""Cache breakpoints as timed pins, end to end on the real default model with a small KV pool, driven
through the request path (GenerationRequest.cache_breakpoints, as the Messages API fills them):

- a prefix marked 1h still hits after a flood of other prefixes evicts an unmarked one (which misses);
  once its TTL is up (settings.cache_ttl_scale shortens 1h to 3.6 s of the engine's clock, which the
  test advances) the next flood evicts it too;
- the tenant's pin quota is never exceeded: a marked prefix past it is served and cached as any other;
- usage: the first call writes the prompt up to the breakpoint, the second reads it and writes nothing,
  and prompt = input + write + read;
- no page leaks: idle, free + cached pages = the pool; with the pins expired and the cache flushed, the
  whole pool is free.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from gateway.db.models import Tenant
from gateway.deps import Caller
from gateway.generation.answer import complete
from gateway.generation.request import CacheBreakpoint, GenerationRequest, Sampling
from gateway.main import create_app
from tests.support.app import admin_headers, make_settings

pytestmark = pytest.mark.slow

SCALE = 0.001  # 1h -> 3.6 s, 5m -> 0.3 s
POOL_TOKENS = 384  # 24 pages of 16; pins may hold half
FACTS = ("pipelines rebuild when the lockfile changes, caches expire after a week, artifacts are signed, "
         "the base image is rebuilt nightly and every job reports its cache key in the first log line. ")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def small_engine():
    from engine import Engine, EngineConfig

    engine = Engine(EngineConfig(kv_cache_tokens=POOL_TOKENS, device="cpu")).start()
    yield engine
    engine.shutdown()


@pytest.fixture()
def clock(small_engine) -> Clock:
    small_engine.flush_cache()
    small_engine.cache.clock = clock = Clock()
    return clock


def system(name: str) -> str:
    return f"{name} is the assistant of this build farm. It knows that {FACTS * 3}"


def request(name: str, marks=(), question: str = "Why did job 4411 rebuild?") -> GenerationRequest:
    messages = ({"role": "system", "content": system(name)}, {"role": "user", "content": question})
    return GenerationRequest(model="default", messages=messages, sampling=Sampling(max_tokens=1, temperature=0),
                             cache_breakpoints=tuple(marks))


async def new_caller(client: httpx.AsyncClient, gw, name: str, quota: int) -> Caller:
    made = await client.post("/admin/tenants", json={"name": name, "pin_quota_tokens": quota}, headers=admin_headers())
    assert made.status_code == 201, made.text
    with gw.session_factory() as session:
        tenant = session.get(Tenant, made.json()["id"])
        session.expunge(tenant)
    return Caller(tenant=tenant, api_key_id=made.json()["api_key"]["id"])


async def call(gw, caller: Caller, req: GenerationRequest):
    run = await gw.path.start(lambda: req, model=req.model, caller=caller, http_request=None)
    return (await complete(run)).usage


async def flood(gw, caller: Caller, tag: str, num_tokens: int) -> None:
    """Distinct prefixes until `num_tokens` prompt tokens went through: past the pool's size, every page that was
    there before and is not pinned was evicted (LRU takes the older pages first)."""
    sent = 0
    for i in range(64):
        sent += (await call(gw, caller, request(f"Flood{tag}{i}"))).prompt_tokens
        if sent >= num_tokens:
            return
    raise AssertionError("the flood never reached its size")


def run_with_app(tmp_path, engine, scenario):
    async def main():
        app = create_app(make_settings(tmp_path, cache_ttl_scale=SCALE), engine=engine)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
                return await scenario(app.state.gw, client)

    return asyncio.run(main())


def pool_figures(engine) -> dict:
    stats = engine.stats()
    pool, cache = stats["pool"], stats["cache"]
    return {"total": pool["num_pages"], "free": pool["num_free_pages"], "cached": cache["cached_tokens"] // pool["page_size"],
            "pinned": cache["pinned_tokens"] // pool["page_size"], "num_pins": cache["num_pins"]}


def pinned_in(engine, caller: Caller) -> int:
    namespace = f"tenant:{caller.tenant.id}|{engine.model_id}"
    return engine.stats()["cache"]["namespaces"].get(namespace, {}).get("pinned_tokens", 0)


def test_a_1h_breakpoint_outlives_a_flood_until_its_ttl_then_is_evicted_and_no_page_leaks(tmp_path, small_engine, clock):
    engine = small_engine
    hour = [CacheBreakpoint(1, 3600.0)]

    async def scenario(gw, client):
        caller = await new_caller(client, gw, "marked", quota=200)
        seen = {"first": await call(gw, caller, request("Marked", hour))}
        seen["over_quota"] = await call(gw, caller, request("Second", hour))  # would take the tenant past 200
        seen["pinned_after_two"] = pinned_in(engine, caller)
        await call(gw, caller, request("Unmarked"))
        await flood(gw, caller, "a", POOL_TOKENS + 64)
        seen["marked_after_flood"] = await call(gw, caller, request("Marked", hour, "What expires after a week?"))
        seen["unmarked_after_flood"] = await call(gw, caller, request("Unmarked"))
        seen["second_after_flood"] = await call(gw, caller, request("Second"))
        seen["idle"] = pool_figures(engine)
        clock.now = 3600 * SCALE  # the last hit refreshed it at 0: its TTL is up now
        await flood(gw, caller, "b", POOL_TOKENS + 64)
        seen["after_ttl"] = pool_figures(engine)
        seen["marked_after_ttl"] = await call(gw, caller, request("Marked"))
        return seen

    seen = run_with_app(tmp_path, engine, scenario)
    breakpoint_tokens = seen["first"].cache_write_tokens
    assert 100 < breakpoint_tokens <= 200 and seen["first"].cached_tokens == 0
    assert seen["first"].cache_write_1h_tokens == breakpoint_tokens
    assert seen["pinned_after_two"] == breakpoint_tokens  # the second one stayed unpinned: the quota holds
    assert seen["over_quota"].cache_write_tokens > 100  # ... and was still served and cached as any other
    assert seen["marked_after_flood"].cached_tokens >= breakpoint_tokens
    assert seen["marked_after_flood"].cache_write_tokens == 0
    assert seen["unmarked_after_flood"].cached_tokens == 0 and seen["second_after_flood"].cached_tokens == 0
    idle = seen["idle"]
    assert idle["free"] + idle["cached"] == idle["total"] and idle["pinned"] * 16 == breakpoint_tokens
    assert seen["after_ttl"]["num_pins"] == 0 and seen["after_ttl"]["pinned"] == 0
    assert seen["after_ttl"]["free"] + seen["after_ttl"]["cached"] == seen["after_ttl"]["total"]
    assert seen["marked_after_ttl"].cached_tokens == 0  # evicted by the second flood
    clock.now = 10**9
    engine.flush_cache()
    final = pool_figures(engine)
    assert final["num_pins"] == 0 and final["free"] == final["total"]


def test_the_first_call_writes_up_to_the_breakpoint_and_the_second_reads_it(tmp_path, small_engine, clock):
    engine = small_engine
    marks = [CacheBreakpoint(1, 300.0)]

    async def scenario(gw, client):
        caller = await new_caller(client, gw, "reader", quota=10_000)
        first = await call(gw, caller, request("Reader", marks))
        second = await call(gw, caller, request("Reader", marks, "Which images are signed?"))
        return first, second, pinned_in(engine, caller)

    first, second, pinned = run_with_app(tmp_path, engine, scenario)
    assert first.cached_tokens == 0 and first.cache_write_tokens > 100 and first.cache_write_1h_tokens == 0
    assert pinned == first.cache_write_tokens
    assert second.cached_tokens >= first.cache_write_tokens and second.cache_write_tokens == 0
    for usage in (first, second):  # Anthropic's input_tokens, the rest of the prompt, is never negative
        assert usage.prompt_tokens - usage.cached_tokens - usage.cache_write_tokens > 0
    clock.now = 10**9
    assert engine.stats()["cache"]["num_pins"] == 0
