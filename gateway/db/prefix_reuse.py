"""Static-prefix reuse in a tenant's request log: prefix lengths, first sightings, attainable hits.

Definitions (shared by the dashboard and the cache doctor):

- A request's *static key* is its canonical (system_hash, tools_hash, context_hash):
  equal keys render equal static prefixes (canonical order, section-stable tokens).
- A key's *static prefix tokens* S_k are not logged (the log holds counts and
  hashes, never text), so they are estimated: the most tokens any request with
  that key got from cache (actual or raw-order shadow). A key that never hit
  gets the tenant's median S/prompt ratio (over keys that did hit) times its
  shortest prompt; when no key of the tenant ever hit, `DEFAULT_STATIC_FRACTION`
  of its shortest prompt (marked `is_assumed`).
- **Attainable cached tokens** of a request: what an unbounded cache, empty at the
  window's start and fed every request of the tenant in canonical order, would
  have served: min(prompt, S_k) when an earlier request in the window had the
  same static key, else nothing more than the request actually got; never less
  than the actual cached tokens. Attainable hit rate = sum(attainable) / sum(prompt).
  It is the ceiling for a cache that only reuses this tenant's own traffic; pins,
  warm-up and cache groups can beat it on first sightings (the doctor's cold starts).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

DEFAULT_STATIC_FRACTION = 0.75
"""Assumed share of a prompt that is static prefix when a tenant never hit at all (agent/RAG traffic)."""


@dataclass(frozen=True)
class LogRow:
    """The request-log columns the reuse analysis needs (one request)."""

    created_at: datetime
    tenant_id: int | None
    prompt_tokens: int
    cached_tokens: int
    shadow_cached_tokens: int | None = None
    canonicalized: bool = True
    was_canonical: bool = True
    dynamic_patterns: str | None = None
    sections_found: str | None = None
    system_hash: str | None = None
    tools_hash: str | None = None
    context_hash: str | None = None
    miss_cause: str | None = None
    template: str | None = None
    ttft_ms: float | None = None
    status: str = "ok"

    @property
    def static_key(self) -> tuple:
        return (self.system_hash, self.tools_hash, self.context_hash)

    @property
    def system_key(self) -> tuple:
        """The system prefix (system + tools): what tenants of one cache group could share."""
        return (self.system_hash, self.tools_hash)


@dataclass(frozen=True)
class PrefixEstimate:
    """Estimated static-prefix tokens per static key; `is_assumed` when no key of the tenant ever hit."""

    tokens_by_key: dict[tuple, int]
    is_assumed: bool

    def prefix_tokens(self, row: LogRow) -> int:
        """Static-prefix tokens of `row`, never more than its prompt."""
        return min(row.prompt_tokens, self.tokens_by_key.get(row.static_key, 0))


def estimate_prefix_tokens(rows: Iterable[LogRow]) -> PrefixEstimate:
    """Estimate S_k for every static key in `rows` (see module docstring)."""
    best: dict[tuple, int] = {}
    shortest: dict[tuple, int] = {}
    for row in rows:
        key = row.static_key
        hit = max(row.cached_tokens, row.shadow_cached_tokens or 0)
        best[key] = max(best.get(key, 0), hit)
        shortest[key] = min(shortest.get(key, row.prompt_tokens), row.prompt_tokens)
    ratios = [best[k] / shortest[k] for k in best if best[k] > 0 and shortest[k] > 0]
    is_assumed = not ratios
    fraction = DEFAULT_STATIC_FRACTION if is_assumed else min(1.0, statistics.median(ratios))
    tokens = {k: best[k] if best[k] > 0 else int(shortest[k] * fraction) for k in best}
    return PrefixEstimate(tokens_by_key=tokens, is_assumed=is_assumed)


def mark_first_sightings(rows: Sequence[LogRow]) -> list[bool]:
    """For rows in time order: True where the row is the first of its static key (per tenant)."""
    seen: set[tuple] = set()
    firsts = []
    for row in rows:
        key = (row.tenant_id, row.static_key)
        firsts.append(key not in seen)
        seen.add(key)
    return firsts


def attainable_tokens(rows: Sequence[LogRow], estimate: PrefixEstimate | None = None) -> list[int]:
    """Attainable cached tokens per row (rows in time order; see module docstring)."""
    estimate = estimate or estimate_prefix_tokens(rows)
    firsts = mark_first_sightings(rows)
    return [
        row.cached_tokens if is_first else max(row.cached_tokens, estimate.prefix_tokens(row))
        for row, is_first in zip(rows, firsts)
    ]
