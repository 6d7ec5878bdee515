"""Prefix affinity: rendezvous ranking, failover, and the Router on top (policies: test_policy.py)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.routing.affinity import affinity_key, rank, rendezvous_score
from gateway.routing.backend import BackendChunk, BackendUnavailableError, BackendUsage, GenerationParams, PreparedPrompt
from gateway.routing.router import FailoverBackend, Router, routing_key

NAMES = ["r0", "r1", "r2", "r3"]


class StubBackend:
    """A unit-test stand-in for a backend: yields one chunk, or fails before it."""

    def __init__(self, name: str, *, is_failing: bool = False, model: str = "m", is_up: bool = True) -> None:
        self.name, self.model, self.weight = name, model, 1.0
        self.is_failing = is_failing
        self.is_up = is_up
        self.num_calls = 0

    def is_healthy(self) -> bool:
        return self.is_up

    def abort(self, request_id: str) -> None:
        pass

    async def stream(self, prompt, params, namespace, request_id):
        self.num_calls += 1
        if self.is_failing:
            raise BackendUnavailableError(f"{self.name} down")
        yield BackendChunk(text=self.name)
        yield BackendChunk(finish_reason="stop", usage=BackendUsage(1, 0, 1))


def make_prompt(prefix: tuple[int, ...], model: str = "m") -> PreparedPrompt:
    return PreparedPrompt(token_ids=prefix + (9, 9), text="", messages=(), static_prefix_len=len(prefix), model=model)


async def collect(backend, prompt) -> list[BackendChunk]:
    return [c async for c in backend.stream(prompt, GenerationParams(), "ns", "req")]


@given(st.text(min_size=1))
def test_rank_is_a_deterministic_permutation(key):
    order = rank(key, NAMES)
    assert sorted(order) == list(range(len(NAMES)))
    assert rank(key, NAMES) == order


def test_removing_a_backend_moves_only_its_own_keys():
    keys = [f"key-{i}" for i in range(400)]
    before = {k: NAMES[rank(k, NAMES)[0]] for k in keys}
    survivors = [n for n in NAMES if n != "r2"]
    after = {k: survivors[rank(k, survivors)[0]] for k in keys}
    moved = [k for k in keys if before[k] != after[k]]
    assert moved and all(before[k] == "r2" for k in moved)


def test_keys_spread_over_backends_in_proportion_to_weight():
    weights = [1.0, 1.0, 2.0, 4.0]
    firsts = Counter(rank(f"k{i}", NAMES, weights)[0] for i in range(4000))
    shares = [firsts[i] / 4000 for i in range(4)]
    assert shares == pytest.approx([1 / 8, 1 / 8, 2 / 8, 4 / 8], abs=0.04)


def test_rendezvous_score_is_positive_and_grows_with_weight():
    assert 0 < rendezvous_score("k", "r0", 1.0) < rendezvous_score("k", "r0", 2.0)


def test_router_sends_the_same_prefix_to_the_same_replica():
    replicas = [StubBackend(n) for n in NAMES]
    router = Router(None, replicas)
    prompt = make_prompt((1, 2, 3, 4))
    picked = {router.pick(prompt, "tenant:1").candidates[0].name for _ in range(10)}
    assert len(picked) == 1
    prefixes = {router.pick(make_prompt((i, i + 1)), "tenant:1").candidates[0].name for i in range(60)}
    assert len(prefixes) > 1


def test_the_key_is_the_system_and_tools_prefix_whatever_the_context_after_it():
    system, contexts = (5, 6, 7), [(10 + i, 20 + i) for i in range(40)]
    prompts = [PreparedPrompt(system + c + (9,), "", (), len(system) + len(c), "m", system_prefix_len=len(system))
               for c in contexts]
    assert len({routing_key(p, "ns", None) for p in prompts}) == 1
    router = Router(None, [StubBackend(n) for n in NAMES])
    assert len({router.pick(p, "ns").candidates[0].name for p in prompts}) == 1
    other = PreparedPrompt((5, 6, 8) + contexts[0] + (9,), "", (), 5, "m", system_prefix_len=3)
    assert routing_key(other, "ns", None) != routing_key(prompts[0], "ns", None)
    # no system or tools section: the whole static prefix is the key, context included
    assert len({routing_key(make_prompt(c), "ns", None) for c in contexts}) == len(contexts)
    assert routing_key(prompts[0], "ns", "conv-1") == routing_key(other, "ns", "conv-1")


def test_router_prefers_embedded_for_unknown_models_and_remotes_by_name():
    embedded, remote = StubBackend("embedded"), StubBackend("sglang", model="llama-70b")
    router = Router(embedded, [remote])
    assert router.pick(make_prompt((1,), model="default"), "ns") is embedded
    assert router.pick(make_prompt((1,), model="llama-70b"), "ns").candidates == [remote]
    assert router.pick(make_prompt((1,), model="sglang"), "ns").candidates == [remote]


def test_failover_backend_skips_a_failing_replica_and_records_which_served():
    down, up = StubBackend("down", is_failing=True), StubBackend("up")
    failover = FailoverBackend([down, up], Router(None, [down, up]).loads)
    chunks = asyncio.run(collect(failover, make_prompt((1,))))
    assert [c.text for c in chunks] == ["up", ""]
    assert failover.name == "up" and down.num_calls == 1


def test_failover_backend_raises_when_every_replica_fails_and_tries_only_two():
    stubs = [StubBackend(n, is_failing=True) for n in "abc"]
    router = Router(None, stubs)
    backend = router.pick(make_prompt((1,)), "ns")
    with pytest.raises(BackendUnavailableError, match="down"):
        asyncio.run(collect(backend, make_prompt((1,))))
    assert backend.num_failovers == 1 and sum(s.num_calls for s in stubs) == 2
    assert all(router.loads.load(n) == 0 for n in "abc")


def test_router_refuses_with_503_when_every_replica_is_down():
    router = Router(None, [StubBackend("a", is_up=False), StubBackend("b", is_up=False)])
    with pytest.raises(BackendUnavailableError, match="down"):
        router.pick(make_prompt((1,)), "ns")


def test_affinity_key_separates_namespaces():
    assert affinity_key("tenant:1", "h") != affinity_key("tenant:2", "h")
