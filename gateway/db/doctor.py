"""The cache doctor: why a tenant's requests miss the prefix cache, ranked, with fixes and what each is worth.

Every figure comes from the measured counterfactuals in the request log (gateway/db/doctor_queries.py):
a lost token is one the request prefilled that the counterfactual removing a cause would have
served from cache. Causes, each with the counterfactual that removes it:

    dynamic_content, context_first, tools_vary, section_order
                    the canonical order instead of the client's raw order (raw requests' `order`
                    gain, named by the request's signals: dynamic patterns found, documents ahead of
                    the system prompt, tools present, any other layout)
    eviction        an unbounded cache of the tenant's own traffic in the order it was served
    isolation       one cache group with the tenants that sent the same system prefix (canonical
                    order) before this tenant first did: the system-prefix part of the cold loss
    tools_vary, cold_start
                    the static prefix already cached (pinned or warmed) when it was first sent:
                    the rest of the cold loss, tools_vary where the tool list was what changed

Speedup if fixed, per cause and for turning canonicalization on (all ordering causes at once):
before / after, where before = the window's uncached prompt tokens and after = before - the
tokens the fix recovers, under SPEEDUP_MODEL; and under TTFT_MODEL with the tenant's own TTFTs.
canonical_hit_rate (= attainable_hit_rate) = canonical cached / canonical prompt tokens.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from gateway.db import doctor_queries, insight_queries
from gateway.db.doctor_fixes import COUNTERFACTUALS, CauseFacts, describe_cause
from gateway.db.doctor_queries import LossGroup, TtftFit
from gateway.db.models import Tenant

SPEEDUP_MODEL = "prefill time ~ uncached prompt tokens (summed over the window's requests)"
TTFT_MODEL = "TTFT = a + b x uncached tokens, least squares over the tenant's own completed requests"
ORDER_CAUSES = ("dynamic_content", "context_first", "tools_vary", "section_order")


@dataclass(frozen=True)
class Cause:
    """One ranked cause of lost prefix-cache hits; `speedup`: fixing it alone (SPEEDUP_MODEL)."""

    code: str
    title: str
    lost_tokens: int
    share: float
    num_requests: int
    detail: str
    fix: str
    counterfactual: str
    speedup: float | None


@dataclass(frozen=True)
class Speedup:
    """Prefill speedup if `cause` is fixed ("canonicalize": every ordering cause at once)."""

    cause: str
    uncached_tokens_before: int
    uncached_tokens_after: int
    speedup: float | None  # None: fixing it would leave nothing to prefill
    hit_rate_after: float
    ttft_speedup: float | None  # None: the tenant's TTFTs do not determine a rising line
    model: str = SPEEDUP_MODEL
    ttft_model: str = TTFT_MODEL


@dataclass(frozen=True)
class Diagnosis:
    tenant_id: int
    tenant_name: str
    num_requests: int
    prompt_tokens: int
    cached_tokens: int
    raw_cached_tokens: int
    canonical_cached_tokens: int
    canonical_prompt_tokens: int
    lost_tokens: int
    causes: list[Cause] = field(default_factory=list)
    speedup: Speedup | None = None  # the top cause
    canonicalize_speedup: Speedup | None = None  # None: no raw-order traffic lost anything to its order
    ttft_line_ms: tuple[float, float] | None = None  # (a ms, b ms per uncached token) of TTFT_MODEL

    @property
    def hit_rate(self) -> float:
        return ratio(self.cached_tokens, self.prompt_tokens)

    @property
    def canonical_hit_rate(self) -> float:
        return ratio(self.canonical_cached_tokens, self.canonical_prompt_tokens)

    @property
    def attainable_hit_rate(self) -> float:
        return self.canonical_hit_rate

    @property
    def raw_hit_rate(self) -> float:
        return ratio(self.raw_cached_tokens, self.prompt_tokens)

    def to_dict(self) -> dict:
        data = asdict(self)
        data.update(hit_rate=self.hit_rate, canonical_hit_rate=self.canonical_hit_rate,
                    attainable_hit_rate=self.attainable_hit_rate, raw_hit_rate=self.raw_hit_rate)
        return data


def ratio(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else 0.0


def diagnose(
    session: Session, tenant_id: int, since: datetime | None = None, until: datetime | None = None
) -> Diagnosis:
    """Diagnose one tenant's request log in [since, until). Raises LookupError for an unknown tenant."""
    tenant = session.get(Tenant, tenant_id)
    if tenant is None:
        raise LookupError(f"no tenant with id {tenant_id}")
    groups = doctor_queries.loss_groups(session, tenant_id, since, until)
    system_keys = {g.system_key for g in groups if g.shared > 0 and g.system_hash}
    sightings = insight_queries.find_system_sightings(session, tenant_id, system_keys, until)
    pins = insight_queries.list_pins(session, tenant_id, is_active_only=True)
    return diagnose_groups(
        tenant, groups, sightings,
        num_requests=doctor_queries.count_requests(session, tenant_id, since, until),
        fit=doctor_queries.ttft_fit(session, tenant_id, since, until),
        num_active_pins=len(pins),
    )


def diagnose_groups(
    tenant, groups: list[LossGroup], sightings: dict, *, num_requests: int, fit: TtftFit | None = None,
    num_active_pins: int = 0,
) -> Diagnosis:
    """The analysis behind `diagnose`, on the loss groups already summed."""
    facts = CauseFacts(tenant=tenant, groups=groups, num_active_pins=num_active_pins)
    lost, requests = attribute(groups, isolated_keys(groups, sightings, tenant.cache_group, facts), facts)
    before = sum(g.uncached_tokens for g in groups)
    prompt = sum(g.prompt_tokens for g in groups)
    line = fit.line() if fit is not None else None
    num_rows = sum(g.requests for g in groups)

    def speedup(cause: str, recovered: int) -> Speedup:
        return make_speedup(cause, before, recovered, prompt, line, num_rows)

    total_lost = sum(lost.values())
    causes = [
        build_cause(code, tokens, total_lost, requests[code], facts, speedup(code, tokens).speedup)
        for code, tokens in sorted(lost.items(), key=lambda item: (-item[1], item[0]))
    ]
    order_lost = sum(g.order for g in groups)
    return Diagnosis(
        tenant_id=tenant.id,
        tenant_name=tenant.name,
        num_requests=num_requests,
        prompt_tokens=prompt,
        cached_tokens=sum(g.cached_tokens for g in groups),
        raw_cached_tokens=sum(g.raw_cached_tokens for g in groups),
        canonical_cached_tokens=sum(g.canonical_cached_tokens for g in groups),
        canonical_prompt_tokens=sum(g.canonical_prompt_tokens for g in groups),
        lost_tokens=total_lost,
        causes=causes,
        speedup=speedup(causes[0].code, causes[0].lost_tokens) if causes else None,
        canonicalize_speedup=speedup("canonicalize", order_lost) if order_lost else None,
        ttft_line_ms=line,
    )


def isolated_keys(groups: list[LossGroup], sightings: dict, cache_group: str | None, facts: CauseFacts) -> set:
    """System keys another tenant outside `cache_group` sent (canonical order) before this tenant did."""
    first_seen: dict[tuple, datetime] = {}
    for g in groups:
        if g.system_key not in first_seen or g.first_seen < first_seen[g.system_key]:
            first_seen[g.system_key] = g.first_seen
    isolated = set()
    for key, seen in first_seen.items():
        earlier = [s for s in sightings.get(key, []) if s.first_seen <= seen]
        outside = [s for s in earlier if cache_group is None or s.cache_group != cache_group]
        if outside:
            facts.note_isolation(key, outside)
            isolated.add(key)
    return isolated


def attribute(groups: list[LossGroup], isolated: set, facts: CauseFacts) -> tuple[Counter, Counter]:
    """Lost tokens and losing requests per cause (rules in the module docstring)."""
    lost: Counter = Counter()
    requests: Counter = Counter()

    def add(code: str, tokens: int, num_requests: int) -> None:
        if tokens > 0:
            lost[code] += tokens
            requests[code] += num_requests

    for g in groups:
        add("eviction", g.eviction, g.num_eviction)
        add(order_cause(g, facts), g.order, g.num_order)
        is_isolated = g.system_key in isolated
        shared = g.shared if is_isolated else 0
        add("isolation", shared, g.num_shared)
        num_cold = g.num_cold_beyond_shared if is_isolated else g.num_cold
        add("tools_vary" if g.miss_cause == "tools" else "cold_start", g.cold - shared, num_cold)
    return lost, requests


def order_cause(group: LossGroup, facts: CauseFacts) -> str:
    """Which ordering cause a raw-order group's loss is named after, from its signals."""
    if group.dynamic_patterns:
        if group.order > 0:
            facts.note_patterns(group.dynamic_patterns, group.requests)
        return "dynamic_content"
    found = set((group.sections_found or "").split(","))
    if not group.was_canonical and "context" in found:
        return "context_first"
    if not group.was_canonical and "tools" in found:
        return "tools_vary"
    return "section_order"


def build_cause(code: str, lost: int, total_lost: int, num_requests: int, facts: CauseFacts, speedup) -> Cause:
    title, detail, fix = describe_cause(code, facts)
    share = lost / total_lost if total_lost else 0.0
    return Cause(code, title, lost, share, num_requests, detail, fix, COUNTERFACTUALS[code], speedup)


def make_speedup(
    cause: str, before: int, recovered: int, prompt: int, line: tuple[float, float] | None, num_rows: int
) -> Speedup:
    after = max(0, before - recovered)
    ttft = None
    if line is not None:
        intercept, slope = line
        ttft_after = num_rows * intercept + slope * after
        ttft = (num_rows * intercept + slope * before) / ttft_after if ttft_after > 0 else None
    return Speedup(
        cause=cause,
        uncached_tokens_before=before,
        uncached_tokens_after=after,
        speedup=before / after if after else None,
        hit_rate_after=(prompt - after) / prompt if prompt else 0.0,
        ttft_speedup=ttft,
    )
