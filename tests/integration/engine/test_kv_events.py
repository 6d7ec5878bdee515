"""A real engine publishes its radix cache's KV events over ZMQ on loopback; the edge's subscriber
indexes them: stored, evicted and cleared blocks are reflected exactly (engine/kv_events.py,
gateway/routing/kv_subscriber.py, gateway/routing/kv_index.py)."""

from __future__ import annotations

import asyncio
import time

import pytest

from engine import SamplingParams
from gateway.routing.kv_subscriber import KVEventSubscriber
from tests.support.ports import free_port

pytestmark = pytest.mark.slow

PAGE = 16
SALTS = ("salt-a", "salt-b")


def prompts(smollm) -> list[tuple[str, str, list[int]]]:
    """(namespace, salt, tokens): two tenants, each a long shared prefix and a few distinct questions."""
    tok = smollm.tokenizer
    shared = tok.encode(" ".join(f"rule {i} says keep the ledger balanced" for i in range(40)))
    rows = []
    for salt in SALTS:
        for q in range(3):
            rows.append((f"tenant:{salt}|m|salt:{salt}", salt, shared + tok.encode(f" Question {q}: what is rule {q}?")))
    return rows


async def settle(subscriber: KVEventSubscriber, engine, rows, timeout_s: float = 10.0) -> None:
    """Wait until the index agrees with the engine's cache (events arrive asynchronously), or time out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if subscriber.is_live and subscriber.index.num_blocks == engine.cache.num_cached_pages:
            return
        await asyncio.sleep(0.05)


def truth(engine, namespace, tokens) -> int:
    with engine._lock:
        return engine.cache.peek_prefix(namespace, tokens)[1]


async def test_index_follows_a_real_engine_through_store_evict_and_clear(make_engine, smollm):
    port, replay_port = free_port(), free_port()
    subscriber = KVEventSubscriber("node", f"tcp://127.0.0.1:{port}", topic="kv",
                                   replay_endpoint=f"tcp://127.0.0.1:{replay_port}")
    subscriber.start()
    await asyncio.sleep(0.2)  # bound before the engine's publisher connects
    rows = prompts(smollm)
    num_pages = 3 * len(rows[0][2]) // (2 * PAGE)  # one and a half prefixes: the second tenant evicts
    engine = make_engine(num_pages=num_pages, page_size=PAGE, kv_events_endpoint=f"tcp://127.0.0.1:{port}",
                         kv_events_replay_endpoint=f"tcp://127.0.0.1:{replay_port}")
    try:
        for namespace, _, tokens in rows:
            await asyncio.to_thread(engine.generate_sync, tokens, SamplingParams(max_tokens=2), namespace=namespace)
        await settle(subscriber, engine, rows)
        assert engine.cache.num_evicted_pages > 0, "the pool is small enough to evict"
        assert subscriber.index.num_removed > 0
        assert subscriber.index.num_blocks == engine.cache.num_cached_pages
        figures = [(subscriber.index.cached_tokens(salt, tokens), truth(engine, namespace, tokens))
                   for namespace, salt, tokens in rows]
        assert [f[0] for f in figures] == [f[1] for f in figures]
        assert any(held > 0 for held, _ in figures)
        # another tenant's salt finds nothing of these tokens
        namespace, _, tokens = rows[-1]
        assert subscriber.index.cached_tokens("salt-zzz", tokens) == 0

        engine.flush_cache()
        await settle(subscriber, engine, rows)
        assert engine.cache.num_cached_pages == 0
        assert subscriber.index.num_blocks == 0

        await asyncio.to_thread(engine.generate_sync, tokens, SamplingParams(max_tokens=2), namespace=namespace)
        await settle(subscriber, engine, rows)
        assert subscriber.index.cached_tokens(SALTS[1], tokens) == truth(engine, namespace, tokens) > 0
        cleared = subscriber.index.num_cleared
        engine.shutdown()
        engine.close()  # a stopping engine publishes AllBlocksCleared
        deadline = time.monotonic() + 5
        while subscriber.index.num_cleared == cleared and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert subscriber.index.num_blocks == 0
    finally:
        await subscriber.stop()
