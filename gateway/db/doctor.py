"""The cache doctor: why a tenant's requests miss the prefix cache, ranked, with fixes.

Model (see prefix_reuse.py for static keys, S_k and attainable tokens):
- A request *loses* max(0, min(prompt, S_k) - cached) tokens: the part of its
  static prefix it had to prefill although that prefix is reusable.
- Each losing request gets exactly one cause, so shares add up to 100%:
  first sighting of its static key in the tenant ->
      `isolation` (another tenant outside its cache group sent the same system
      prefix earlier), `tools_vary` (the log's miss_cause says the tool list
      changed first), else `cold_start`;
  a repeat of a known key sent in the client's raw order (canonicalization off) ->
      `dynamic_content` (dynamic patterns found), `context_first` (documents placed
      in messages ahead of the static prefix), `tools_vary` (tools unsorted),
      `section_order` (any other non-canonical layout), else `eviction`;
  a repeat sent in canonical order -> `eviction` (the prefix left the cache
  before reuse: cache too small or pins missing).
- Speedup if the top cause is fixed: prefill time ~ uncached prompt tokens, so
  speedup = sum(prompt - cached) / (sum(prompt - cached) - lost tokens of that cause).
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from gateway.db import insight_queries
from gateway.db.doctor_fixes import CauseFacts, describe_cause
from gateway.db.models import Tenant
from gateway.db.prefix_reuse import LogRow, attainable_tokens, estimate_prefix_tokens, mark_first_sightings

SPEEDUP_MODEL = "prefill time ~ uncached prompt tokens (summed over the window's requests)"


@dataclass(frozen=True)
class Cause:
    """One ranked cause of lost prefix-cache hits."""

    code: str
    title: str
    lost_tokens: int
    share: float
    num_requests: int
    detail: str
    fix: str


@dataclass(frozen=True)
class Speedup:
    """Estimated prefill speedup if `cause` is fixed (see SPEEDUP_MODEL)."""

    cause: str
    uncached_tokens_before: int
    uncached_tokens_after: int
    speedup: float | None  # None: fixing the cause would leave nothing to prefill
    hit_rate_after: float
    prompt_tokens_p50: int
    prompt_tokens_p95: int
    model: str = SPEEDUP_MODEL


@dataclass(frozen=True)
class Diagnosis:
    tenant_id: int
    tenant_name: str
    num_requests: int
    prompt_tokens: int
    cached_tokens: int
    attainable_tokens: int
    raw_cached_tokens: int
    lost_tokens: int
    is_prefix_estimate_assumed: bool
    causes: list[Cause] = field(default_factory=list)
    speedup: Speedup | None = None

    @property
    def hit_rate(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def attainable_hit_rate(self) -> float:
        return self.attainable_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def raw_hit_rate(self) -> float:
        return self.raw_cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def to_dict(self) -> dict:
        data = asdict(self)
        data.update(hit_rate=self.hit_rate, attainable_hit_rate=self.attainable_hit_rate, raw_hit_rate=self.raw_hit_rate)
        return data


def diagnose(
    session: Session, tenant_id: int, since: datetime | None = None, until: datetime | None = None
) -> Diagnosis:
    """Diagnose one tenant's request log in [since, until). Raises LookupError for an unknown tenant."""
    tenant = session.get(Tenant, tenant_id)
    if tenant is None:
        raise LookupError(f"no tenant with id {tenant_id}")
    rows = insight_queries.fetch_log_rows(session, tenant_id, since, until)
    system_keys = {row.system_key for row in rows if row.sections_found and "system" in row.sections_found}
    sightings = insight_queries.find_system_sightings(session, tenant_id, system_keys, until)
    pins = insight_queries.list_pins(session, tenant_id, is_active_only=True)
    return diagnose_rows(tenant, rows, sightings, num_active_pins=len(pins))


def diagnose_rows(tenant, rows: list[LogRow], sightings: dict, *, num_active_pins: int = 0) -> Diagnosis:
    """The analysis behind `diagnose`, on rows already fetched (time order).

    Rows without prompt tokens (requests rejected before tokenization) count as requests
    but take no part in the reuse analysis."""
    num_requests = len(rows)
    rows = [row for row in rows if row.prompt_tokens > 0]
    estimate = estimate_prefix_tokens(rows)
    firsts = mark_first_sightings(rows)
    facts = CauseFacts(tenant=tenant, rows=rows, num_active_pins=num_active_pins)
    lost_by_cause: Counter = Counter()
    requests_by_cause: Counter = Counter()
    for row, is_first in zip(rows, firsts):
        lost = max(0, estimate.prefix_tokens(row) - row.cached_tokens)
        if lost == 0:
            continue
        code = classify(row, is_first, sightings, tenant.cache_group, facts)
        lost_by_cause[code] += lost
        requests_by_cause[code] += 1
    total_lost = sum(lost_by_cause.values())
    causes = [
        build_cause(code, lost, total_lost, requests_by_cause[code], facts)
        for code, lost in sorted(lost_by_cause.items(), key=lambda item: (-item[1], item[0]))
    ]
    prompt = sum(row.prompt_tokens for row in rows)
    cached = sum(row.cached_tokens for row in rows)
    return Diagnosis(
        tenant_id=tenant.id,
        tenant_name=tenant.name,
        num_requests=num_requests,
        prompt_tokens=prompt,
        cached_tokens=cached,
        attainable_tokens=sum(attainable_tokens(rows, estimate)),
        raw_cached_tokens=sum(raw_cached(row) for row in rows),
        lost_tokens=total_lost,
        is_prefix_estimate_assumed=estimate.is_assumed,
        causes=causes,
        speedup=estimate_speedup(rows, causes[0]) if causes else None,
    )


def classify(row: LogRow, is_first: bool, sightings: dict, cache_group: str | None, facts: CauseFacts) -> str:
    """The one cause of `row`'s lost tokens (rules in the module docstring)."""
    found = set((row.sections_found or "").split(","))
    if is_first:
        others = [s for s in sightings.get(row.system_key, []) if s.first_seen <= row.created_at]
        outside = [s for s in others if cache_group is None or s.cache_group != cache_group]
        if "system" in found and outside:
            facts.note_isolation(row.system_key, outside)
            return "isolation"
        return "tools_vary" if row.miss_cause == "tools" else "cold_start"
    if row.canonicalized:
        return "eviction"
    if row.dynamic_patterns:
        facts.note_patterns(row.dynamic_patterns)
        return "dynamic_content"
    if not row.was_canonical:
        if "context" in found:
            return "context_first"
        return "tools_vary" if "tools" in found else "section_order"
    return "eviction"


def build_cause(code: str, lost: int, total_lost: int, num_requests: int, facts: CauseFacts) -> Cause:
    title, detail, fix = describe_cause(code, facts)
    return Cause(code, title, lost, lost / total_lost if total_lost else 0.0, num_requests, detail, fix)


def raw_cached(row: LogRow) -> int:
    """What the client's raw order got (or would have got, from the shadow index)."""
    if not row.canonicalized or row.shadow_cached_tokens is None:
        return row.cached_tokens
    return row.shadow_cached_tokens


def estimate_speedup(rows: list[LogRow], top: Cause) -> Speedup:
    """Prefill speedup if `top` is fixed (SPEEDUP_MODEL), with the prompt-length distribution."""
    prompts = sorted(row.prompt_tokens for row in rows)
    prompt = sum(prompts)
    before = sum(max(0, row.prompt_tokens - row.cached_tokens) for row in rows)
    after = max(0, before - top.lost_tokens)
    return Speedup(
        cause=top.code,
        uncached_tokens_before=before,
        uncached_tokens_after=after,
        speedup=before / after if after else None,
        hit_rate_after=(prompt - after) / prompt if prompt else 0.0,
        prompt_tokens_p50=int(statistics.median(prompts)),
        prompt_tokens_p95=prompts[min(len(prompts) - 1, int(0.95 * len(prompts)))],
    )
