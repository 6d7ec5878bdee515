"""The router: which backend serves a request, by model name, routing policy, health and load.

Selection, per request:
1. candidates by model name: remotes whose `model` or `name` equals the request's model; if none,
   the embedded engine (it answers any model name, "default" included); with no embedded engine,
   every remote.
2. the routing policy (routing/policy.py: precise, affinity, random, round robin, least load) orders them,
   skipping nodes that are down or overloaded; the key is the cache namespace plus the client's
   `prompt_cache_key`, else a Responses turn's conversation (its chain's first response id, so
   every turn goes where the previous turns' KV is), else the canonical system + tools prefix's
   token ids (else the whole static prefix; `routing_key`). Under `precise` each node is scored by the
   tokens of this prompt it really holds, from its KV events (`kv_events`: one KVEventSubscriber per
   node that publishes them, routing/kv_subscriber.py); a node without events scores 0 and keeps the
   predicted index (`RouteIndex`), and the log and /admin/backends say which (`cache_index`).
3. the returned FailoverBackend tries the chosen node and, if it fails before its first output
   (BackendUnavailableError, streams included), retries once on another node. After the first
   output an error ends the stream (the client already has that node's tokens).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Sequence

from gateway.routing.affinity import affinity_key
from gateway.routing.backend import Backend, BackendChunk, BackendUnavailableError, GenerationParams, PreparedPrompt
from gateway.routing.load import LoadTracker
from gateway.routing.policy import RoutingPolicy
from gateway.routing.route_index import RouteIndex

if TYPE_CHECKING:
    from gateway.settings import Settings

RAW_PREFIX_TOKENS = 256  # with no canonical static prefix (canonicalize=false): hash this many leading tokens


class FailoverBackend:
    """Tries `candidates` in order until one starts streaming; counts load and the predicted hit.

    `name` is the backend that took (or is taking) the request: read it after the first chunk
    for the request log, with `predicted_cached_tokens` (what the route index expected that node
    to hold) and `num_failovers` (nodes that failed before their first output).
    """

    def __init__(self, candidates: Sequence[Backend], loads: LoadTracker, index: RouteIndex | None = None,
                 predict: Callable[[Backend], int | None] | None = None) -> None:
        """`predict(backend)`: the node's real cached tokens of this prompt (its KV-event index), or None
        where it has none; the RouteIndex's figure stands in for None."""
        if not candidates:
            raise BackendUnavailableError("no backend is available")
        self.candidates = list(candidates)
        self.name = self.candidates[0].name
        self.predicted_cached_tokens: int | None = None
        self.num_failovers = 0
        self._loads = loads
        self._index = index
        self._predict = predict
        self._active: Backend = self.candidates[0]

    @property
    def holds_cache_pins(self) -> bool:
        """Whether the backend taking the request leases cache breakpoints (the embedded engine does)."""
        return getattr(self._active, "holds_cache_pins", False)

    def is_healthy(self) -> bool:
        return any(b.is_healthy() for b in self.candidates)

    def abort(self, request_id: str) -> None:
        self._active.abort(request_id)

    async def stream(
        self, prompt: PreparedPrompt, params: GenerationParams, namespace: str, request_id: str
    ) -> AsyncIterator[BackendChunk]:
        for attempt, backend in enumerate(self.candidates):
            self.name, self._active = backend.name, backend
            if self._index is not None:
                self.predicted_cached_tokens = self._index.observe(backend.name, namespace, prompt.token_ids)
            exact = self._predict(backend) if self._predict is not None else None
            if exact is not None:
                self.predicted_cached_tokens = exact
            health = getattr(backend, "health", None)
            if health is not None:
                health.begin()
            self._loads.begin(backend.name, prompt.num_tokens)
            chunks = backend.stream(prompt, params, namespace, request_id)
            is_started = False
            try:
                async for chunk in chunks:
                    is_started = True
                    yield chunk
                return
            except BackendUnavailableError:
                if is_started or attempt == len(self.candidates) - 1:
                    raise
                self.num_failovers += 1
            finally:
                self._loads.end(backend.name, prompt.num_tokens)
                if health is not None:
                    health.end_probe()
                await chunks.aclose()


class Router:
    """Implements routing.backend.BackendRouter over an optional embedded backend and remote ones."""

    def __init__(
        self, embedded: Backend | None, remotes: Sequence[Backend] = (), *, policy: RoutingPolicy | None = None,
        index: RouteIndex | None = None,
    ) -> None:
        self.embedded = embedded
        self.remotes = list(remotes)
        self.backends: list[Backend] = ([embedded] if embedded is not None else []) + self.remotes
        self.loads = LoadTracker()
        self.policy = policy or RoutingPolicy()
        self.index = index
        self.kv_events: dict = {}  # backend name -> routing.kv_subscriber.KVEventSubscriber

    def cached_tokens(self, backend: Backend, prompt: PreparedPrompt, namespace: str, keys: dict) -> int | None:
        """Tokens of `prompt` `backend` holds by its KV-event index; None when it has no live index."""
        subscriber = self.kv_events.get(backend.name)
        if subscriber is None:
            return None
        health = getattr(backend, "health", None)
        if health is not None and health.state != "up":  # it may come back empty: doubt its index
            subscriber.reset(f"backend {health.state}")
            return None
        if not subscriber.is_live:
            return None
        salter = getattr(backend, "salter", None)
        domain = salter.salt(namespace) if salter is not None else None
        return subscriber.index.cached_tokens(domain, prompt.token_ids, keys)

    def cache_index_of(self, backend: Backend) -> str:
        """"events" (a live KV-event index), "resyncing" (an index being rebuilt) or "predicted"."""
        subscriber = self.kv_events.get(backend.name)
        if subscriber is None:
            return "predicted"
        return "events" if subscriber.is_live else "resyncing"

    def candidates_for(self, model: str) -> list[Backend]:
        """Backends that serve `model` (step 1 of the module docstring)."""
        named = [b for b in self.remotes if model in (getattr(b, "model", None), b.name)]
        if named:
            return named
        if self.embedded is not None:
            return [self.embedded]
        return list(self.remotes)

    def pick(self, prompt: PreparedPrompt, namespace: str, cache_key: str | None = None) -> Backend:
        """The backend for this request: the embedded engine as is, remotes behind a FailoverBackend."""
        candidates = self.candidates_for(prompt.model)
        if not candidates:
            raise BackendUnavailableError("no backend is configured (embedded engine disabled and no remotes)")
        if len(candidates) == 1 and candidates[0] is self.embedded:
            return candidates[0]
        predict = None
        cached = None
        if self.policy.mode == "precise":
            keys: dict = {}
            figures = {b.name: self.cached_tokens(b, prompt, namespace, keys) for b in candidates}
            cached = [figures[b.name] or 0 for b in candidates]
            predict = lambda backend: figures.get(backend.name)  # noqa: E731
        order = self.policy.order(
            routing_key(prompt, namespace, cache_key),
            [b.name for b in candidates],
            admits=[admits(b) for b in candidates],
            loads=[self.loads.load(b.name) for b in candidates],
            weights=[getattr(b, "weight", 1.0) for b in candidates],
            num_tokens=prompt.num_tokens,
            cached=cached,
        )
        if not order:
            raise BackendUnavailableError("every backend for this model is down; retry after their cooldown")
        return FailoverBackend([candidates[i] for i in order], self.loads, self.index, predict)

    def check_grammar(self, grammar: Any) -> None:
        """Compile `grammar` where it will run (the embedded engine; GrammarError if it does not compile).
        Remotes enforce their own output constraints: nothing to check for them. Blocking: call it from a
        worker thread."""
        if self.embedded is not None:
            self.embedded.check_grammar(grammar)

    def describe(self) -> list[dict[str, Any]]:
        """Each backend's health, load and traffic, for GET /admin/backends."""
        rows = []
        for backend in self.backends:
            health = getattr(backend, "health", None)
            rows.append({
                "name": backend.name,
                "model": getattr(backend, "model", None),
                "kind": getattr(backend, "kind", "embedded"),
                "state": health.state if health is not None else "up",
                "failures": health.num_failures if health is not None else 0,
                "recoveries": health.num_recoveries if health is not None else 0,
                "in_flight": self.loads.num_in_flight.get(backend.name, 0),
                "load_tokens": self.loads.load(backend.name),
                "reported_tokens": self.loads.reported_tokens.get(backend.name),
                "requests_sent": self.loads.num_sent.get(backend.name, 0),
                "cache_index": self.cache_index_of(backend) if backend is not self.embedded else "engine",
                "kv_events": self.kv_events[backend.name].describe() if backend.name in self.kv_events else None,
            })
        return rows


def admits(backend: Backend) -> bool:
    health = getattr(backend, "health", None)
    return health.admits() if health is not None else backend.is_healthy()


def routing_key(prompt: PreparedPrompt, namespace: str, cache_key: str | None) -> str:
    """The affinity key: the client's cache key when given, else the canonical system + tools
    prefix's token ids (shared by every request of one agent, whatever its retrieved context or
    conversation, so they meet on one node; the bounded load spreads a hot one), else the whole
    static prefix, else the first RAW_PREFIX_TOKENS ids of a raw-order prompt."""
    if cache_key:
        return affinity_key(namespace, "key:" + cache_key)
    if prompt.system_prefix_len:
        return affinity_key(namespace, prompt.prefix_key(prompt.system_prefix_len))
    if prompt.static_prefix_len:
        return affinity_key(namespace, prompt.prefix_key())
    return affinity_key(namespace, prompt.prefix_key(min(prompt.num_tokens, RAW_PREFIX_TOKENS)))


def build_router(settings: Settings, embedded: Backend | None, *, salter: Any = None) -> Router:
    """The router for `settings.remotes` plus the embedded backend (None when disabled)."""
    remotes = []
    if settings.remotes:
        from gateway.routing.remote import RemoteBackend

        remotes = [RemoteBackend.from_settings(r, salter) for r in settings.remotes]
    routing = settings.routing
    policy = RoutingPolicy(routing.mode, epsilon=routing.epsilon, spill_floor_tokens=routing.spill_floor_tokens,
                           overload_tokens=routing.overload_tokens,
                           max_keys=routing.affinity_keys, rng=random.Random(routing.seed))
    index = RouteIndex(settings.engine.page_size, routing.index_tokens_per_tenant) if remotes else None
    router = Router(embedded, remotes, policy=policy, index=index)
    for remote, config in zip(remotes, settings.remotes):
        if config.kv_events_endpoint:
            from gateway.routing.kv_subscriber import KVEventSubscriber

            router.kv_events[remote.name] = KVEventSubscriber(
                remote.name, config.kv_events_endpoint, topic=config.kv_events_topic,
                replay_endpoint=config.kv_events_replay_endpoint, node_url=remote.root_url)
    return router
