"""CanonicalShadow: what the canonical order would get from an unbounded cache of its domain's traffic.

The second counterfactual beside the raw-order ShadowIndex (gateway/insight/shadow.py). One more
token-only ShadowIndex per cache domain, fed the canonical rendering's token ids of every request,
whether it was served canonicalized or not:

    served canonicalized:  the canonical ids are the served ids (no extra rendering)
    served raw:            the canonical ids are rendered and tokenized here, on the worker

`observe_later` queues the work on one worker thread and returns a Future at once, so the chat
path never waits for it (it runs while the backend prefills); the single worker observes in
arrival order, as the engine would have seen the requests. A request's figures:

    cached_tokens          page-aligned prefix of the canonical ids already indexed in the domain
    prompt_tokens          length of the canonical ids
    static_prefix_tokens   the canonical static prefix (system, tools, context) in tokens
    system_prefix_tokens   its system + tools part, what tenants of one cache group can share

Memory is bounded like the raw shadow's: LRU pages per domain, LRU domains (see ShadowIndex).
`tokenizer` is the given one behind an EncodeCache (the gateway passes the one its request path
encodes through): a tenant's static segments repeat, and a raw request's canonical rendering
repeats pieces its raw rendering just encoded, so rendering it canonically mostly looks ids up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from gateway.canonicalize.encode_cache import EncodeCache
from gateway.insight.shadow import ShadowIndex

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CanonicalPrompt:
    """A request's canonical rendering: its token ids and the lengths of its static parts."""

    token_ids: tuple[int, ...]
    static_prefix_len: int
    system_prefix_len: int


@dataclass(frozen=True)
class CanonicalFigures:
    """What the canonical order would have got (see the module docstring)."""

    cached_tokens: int
    prompt_tokens: int
    static_prefix_tokens: int
    system_prefix_tokens: int


class CanonicalShadow:
    """The canonical-order shadow index and the one worker thread that feeds it."""

    def __init__(self, index: ShadowIndex, tokenizer: Any = None) -> None:
        self.index = index
        is_cached = tokenizer is None or isinstance(tokenizer, EncodeCache)
        self.tokenizer = tokenizer if is_cached else EncodeCache(tokenizer)
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="canonical-shadow")

    def observe(self, namespace: Hashable, prompt: CanonicalPrompt) -> CanonicalFigures:
        """Match-then-insert `prompt` in `namespace`'s index (synchronously)."""
        cached = self.index.observe(namespace, prompt.token_ids)
        return CanonicalFigures(cached, len(prompt.token_ids), prompt.static_prefix_len, prompt.system_prefix_len)

    def observe_later(
        self, namespace: Hashable, make_prompt: Callable[[], CanonicalPrompt | None]
    ) -> Future[CanonicalFigures | None]:
        """Queue `make_prompt()` then `observe` on the worker. The Future holds None when there is
        no canonical rendering (make_prompt returned None or raised: logged, never raised)."""

        def work() -> CanonicalFigures | None:
            try:
                prompt = make_prompt()
            except Exception:  # a counterfactual must never fail or stall the request it describes
                log.debug("no canonical rendering for a request in %s", namespace, exc_info=True)
                return None
            return None if prompt is None else self.observe(namespace, prompt)

        return self._worker.submit(work)

    def close(self) -> None:
        """Finish the queued observations, then stop the worker."""
        self._worker.shutdown(wait=True)
