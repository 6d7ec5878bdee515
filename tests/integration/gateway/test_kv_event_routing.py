"""Precise routing on real KV-event streams over ZMQ on loopback, without a model: each "node" is
an engine radix cache (engine/radix_cache.py over a tensor-less KVPool) publishing through the
engine's own KVEventPublisher, the edge a Router with one KVEventSubscriber per node.

Shown: a subscriber that joins mid-stream replays the node's buffer and is exact; a node restarted
(new cache, new publisher, seq back to 0) has its index dropped and rebuilt from its new events, and
no request is routed on its stale index after it comes back; a node whose health fails is not
routed on its index either."""

from __future__ import annotations

import asyncio
import time

from engine.kv_events import KVEventPublisher
from engine.kv_pool import KVPool
from engine.radix_cache import RadixCache
from gateway.routing.backend import PreparedPrompt
from gateway.routing.kv_subscriber import KVEventSubscriber
from gateway.routing.policy import RoutingPolicy
from gateway.routing.remote import RemoteBackend
from gateway.routing.router import Router
from gateway.routing.salt import CacheSalter
from tests.support.ports import free_port

PAGE = 4
SALTER = CacheSalter(b"test secret")
NAMESPACE = "tenant:1|m"
SALT = SALTER.salt(NAMESPACE)
NODE_NAMESPACE = f"tenant:7|m|salt:{SALT}"  # how a radixgate node names the edge's salted requests
PREFIX = list(range(1000, 1040))  # 10 pages


class Node:
    """A radix cache that publishes its events, as a radixgate node's engine does."""

    def __init__(self, endpoint: str, replay: str) -> None:
        self.endpoint, self.replay = endpoint, replay
        self.start()

    def start(self) -> None:
        self.pool = KVPool(64, PAGE)
        self.cache = RadixCache(self.pool)
        self.publisher = KVEventPublisher(self.endpoint, PAGE, topic="kv", replay_endpoint=self.replay)
        self.cache.kv_events = self.publisher

    def serve(self, tokens: list[int]) -> None:
        """Cache a prompt's whole pages (a request's prefill), evicting LRU pages for room."""
        match = self.cache.match_prefix(NODE_NAMESPACE, tokens)
        need = len(tokens) // PAGE - match.length // PAGE
        if match.length:
            self.cache.lock(match.node)  # a running request holds its matched prefix
        if self.pool.num_free_pages < need:
            self.cache.evict(need - self.pool.num_free_pages)
        self.cache.insert(NODE_NAMESPACE, tokens, match.pages + self.pool.allocate(need))
        if match.length:
            self.cache.unlock(match.node)

    def restart(self) -> None:
        self.publisher.close()
        self.start()

    def held(self, tokens: list[int]) -> int:
        return self.cache.peek_prefix(NODE_NAMESPACE, tokens)[1]


def prompt(tokens: list[int]) -> PreparedPrompt:
    return PreparedPrompt(token_ids=tuple(tokens), text="", messages=(), static_prefix_len=len(tokens), model="m")


async def until(condition, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        await asyncio.sleep(0.02)
    return condition()


async def test_restarted_node_is_reindexed_and_never_routed_on_stale_blocks():
    ports = [(free_port(), free_port()) for _ in range(2)]
    endpoints = [(f"tcp://127.0.0.1:{p}", f"tcp://127.0.0.1:{r}") for p, r in ports]
    nodes = [Node(*e) for e in endpoints]
    remotes = [RemoteBackend(f"node{i}", "m", f"http://127.0.0.1:{9 + i}/v1", kind="radixgate", salter=SALTER)
               for i in range(2)]
    router = Router(None, remotes, policy=RoutingPolicy("precise", spill_floor_tokens=10**9))
    try:
        # node1 serves the prefix before the edge subscribes: its first batches are lost to the edge
        nodes[1].serve(PREFIX + [1, 2, 3, 4])
        await asyncio.sleep(0.2)
        for remote, (endpoint, replay) in zip(remotes, endpoints):
            router.kv_events[remote.name] = KVEventSubscriber(remote.name, endpoint, topic="kv", replay_endpoint=replay)
            router.kv_events[remote.name].start()
        await asyncio.sleep(0.3)
        nodes[0].serve([5] * 40)  # any event on node0; node1's next one shows the edge a gap
        nodes[1].serve(PREFIX + [9, 9, 9, 9])
        subscribers = [router.kv_events[r.name] for r in remotes]
        request = PREFIX + [7] * 8
        assert await until(lambda: subscribers[1].index.num_blocks == nodes[1].cache.num_cached_pages)
        assert await until(lambda: subscribers[0].is_live)
        assert subscribers[1].num_resyncs >= 1  # joined mid-stream: replayed from the node's buffer
        assert router.cached_tokens(remotes[1], prompt(request), NAMESPACE, {}) == nodes[1].held(request) == 40
        chosen = router.pick(prompt(request), NAMESPACE)
        assert chosen.name == "node1"
        assert [router.cache_index_of(r) for r in remotes] == ["events", "events"]

        # node1 restarts: empty cache, seq from 0 again; the edge drops its index
        nodes[1].restart()
        assert await until(lambda: subscribers[1].index.num_blocks == 0 and subscribers[1].is_live)
        assert router.cached_tokens(remotes[1], prompt(request), NAMESPACE, {}) == 0 == nodes[1].held(request)
        # node0 gets the prefix now; the request follows the truth, not node1's old blocks
        nodes[0].serve(PREFIX + [8, 8, 8, 8])
        assert await until(lambda: router.cached_tokens(remotes[0], prompt(request), NAMESPACE, {}) == 40)
        backend = router.pick(prompt(request), NAMESPACE)
        assert backend.name == "node0"
        # node1's index rebuilds from its new events
        nodes[1].serve(PREFIX[:20] + [6] * 4)
        assert await until(lambda: router.cached_tokens(remotes[1], prompt(request), NAMESPACE, {}) == 20)
        assert subscribers[1].index.num_blocks == nodes[1].cache.num_cached_pages

        # a failed health check: the index is dropped and not used until the stream resyncs
        remotes[0].health.record_failure("test")
        assert router.cached_tokens(remotes[0], prompt(request), NAMESPACE, {}) is None
        assert subscribers[0].index.num_blocks == 0
        rows = {row["name"]: row for row in router.describe()}
        assert rows["node0"]["cache_index"] == "resyncing" and rows["node1"]["cache_index"] == "events"
        assert rows["node1"]["kv_events"]["blocks"] == nodes[1].cache.num_cached_pages
    finally:
        for subscriber in router.kv_events.values():
            await subscriber.stop()
        for node in nodes:
            node.publisher.close()


async def test_a_gap_in_the_stream_replays_and_the_index_stays_exact():
    port, replay = free_port(), free_port()
    endpoint, replay_endpoint = f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{replay}"
    subscriber = KVEventSubscriber("n", endpoint, topic="kv", replay_endpoint=replay_endpoint)
    subscriber.start()
    await asyncio.sleep(0.2)
    node = Node(endpoint, replay_endpoint)
    try:
        for i in range(30):  # more than the pool holds: evictions interleave with stores
            node.serve([i % 7] * 8 + list(range(100 * i, 100 * i + 24)))
        ok = await until(lambda: subscriber.is_live and subscriber.index.num_blocks == node.cache.num_cached_pages)
        assert ok, (subscriber.describe(), node.cache.num_cached_pages, len(node.publisher._buffer))
        live_seq = subscriber.last_seq
        # lose batches: the subscriber's next batch is not the one after its last
        await subscriber.on_batch(live_seq + 5, node.publisher._buffer[-1][1])
        assert subscriber.num_resyncs >= 1
        assert subscriber.index.num_blocks == node.cache.num_cached_pages
        for i in range(30):
            tokens = [i % 7] * 8 + list(range(100 * i, 100 * i + 24))
            assert subscriber.index.cached_tokens(SALT, tokens) == node.held(tokens)
    finally:
        await subscriber.stop()
        node.publisher.close()
