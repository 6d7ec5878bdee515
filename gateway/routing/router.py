"""The router: which backend serves a request, by model name, prefix affinity, health and load.

Selection, per request:
1. candidates by model name: remotes whose `model` or `name` equals the request's model; if none,
   the embedded engine (it answers any model name, "default" included); with no embedded engine,
   every remote.
2. among several candidates, prefix affinity (routing/affinity.py) over the cache namespace plus
   the canonical static-prefix hash, with bounded-load fallback and unhealthy backends last.
3. the returned backend fails over: if one fails before its first chunk
   (BackendUnavailableError), the next in that order takes the request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, AsyncIterator, Sequence

from gateway.routing.affinity import DEFAULT_EPSILON, LoadTracker, affinity_key, order_candidates
from gateway.routing.base import Backend, BackendChunk, BackendUnavailableError, GenerationParams, PreparedPrompt

if TYPE_CHECKING:
    from gateway.settings import Settings


class FailoverBackend:
    """Tries `candidates` in order until one starts streaming; counts in-flight load per backend.

    `name` is the backend that took (or is taking) the request: read it after the first chunk
    for the request log. Errors after the first chunk are not retried (the client already has
    output from that backend).
    """

    def __init__(self, candidates: Sequence[Backend], loads: LoadTracker) -> None:
        if not candidates:
            raise BackendUnavailableError("no backend serves this model")
        self.candidates = list(candidates)
        self.name = self.candidates[0].name
        self._loads = loads
        self._active: Backend = self.candidates[0]

    def is_healthy(self) -> bool:
        return any(b.is_healthy() for b in self.candidates)

    def abort(self, request_id: str) -> None:
        self._active.abort(request_id)

    async def stream(
        self, prompt: PreparedPrompt, params: GenerationParams, namespace: str, request_id: str
    ) -> AsyncIterator[BackendChunk]:
        errors: list[str] = []
        for backend in self.candidates:
            self.name, self._active = backend.name, backend
            self._loads.begin(backend.name)
            chunks = backend.stream(prompt, params, namespace, request_id)
            is_started = False
            try:
                async for chunk in chunks:
                    is_started = True
                    yield chunk
                return
            except BackendUnavailableError as exc:
                if is_started:
                    raise
                errors.append(f"{backend.name}: {exc}")
            finally:
                self._loads.end(backend.name)
                await chunks.aclose()
        raise BackendUnavailableError("every backend failed: " + "; ".join(errors))


class Router:
    """Implements routing.base.BackendRouter over an optional embedded backend and remote ones."""

    def __init__(
        self, embedded: Backend | None, remotes: Sequence[Backend] = (), *, epsilon: float = DEFAULT_EPSILON
    ) -> None:
        self.embedded = embedded
        self.remotes = list(remotes)
        self.backends: list[Backend] = ([embedded] if embedded is not None else []) + self.remotes
        self.loads = LoadTracker()
        self._epsilon = epsilon

    def candidates_for(self, model: str) -> list[Backend]:
        """Backends that serve `model` (step 1 of the module docstring)."""
        named = [b for b in self.remotes if model in (getattr(b, "model", None), b.name)]
        if named:
            return named
        if self.embedded is not None:
            return [self.embedded]
        return list(self.remotes)

    def pick(self, prompt: PreparedPrompt, namespace: str) -> Backend:
        """The backend for this request; with several candidates, a FailoverBackend in affinity order."""
        candidates = self.candidates_for(prompt.model)
        if not candidates:
            raise BackendUnavailableError("no backend is configured (embedded engine disabled and no remotes)")
        if len(candidates) == 1:
            return candidates[0]
        order = order_candidates(
            affinity_key(namespace, prompt.prefix_key()),
            [b.name for b in candidates],
            weights=[getattr(b, "weight", 1.0) for b in candidates],
            healthy=[b.is_healthy() for b in candidates],
            loads=[self.loads.load(b.name) for b in candidates],
            epsilon=self._epsilon,
        )
        return FailoverBackend([candidates[i] for i in order], self.loads)


def build_router(settings: Settings, embedded: Backend | None, **kwargs: Any) -> Router:
    """The router for `settings.remotes` plus the embedded backend (None when disabled)."""
    remotes = []
    if settings.remotes:
        from gateway.routing.remote import RemoteBackend

        remotes = [RemoteBackend.from_settings(r) for r in settings.remotes]
    return Router(embedded, remotes, **kwargs)
