"""RouteIndex: the router's own index of what it sent where, for the predicted hit.

One bounded, token-only radix index (insight/shadow.ShadowIndex) per (backend, cache namespace):
when a backend takes a request, `observe` returns the tokens of that prompt it was already sent
(page-aligned, like the engines' caches), which is the hit the router predicts for it, and then
remembers the prompt. Logged beside the delivered hit (`cached_tokens`), the gap between the two
tells a stale index or an evicting backend from a routing or workload shortfall.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.insight.shadow import ShadowIndex


class RouteIndex:
    def __init__(self, page_size: int, max_tokens_per_tenant: int, max_namespaces: int = 4096) -> None:
        self._index = ShadowIndex(page_size, max_tokens_per_tenant, max_namespaces)

    def observe(self, backend_name: str, namespace: str, token_ids: Sequence[int]) -> int:
        """Tokens of `token_ids` already sent to `backend_name` in `namespace`; then remember them."""
        return self._index.observe((backend_name, namespace), token_ids)
