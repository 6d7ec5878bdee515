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

Each cause names (`Cause.reason`) the per-request cache diagnosis reason it sums up over the window
(fixes.DIAGNOSIS_REASONS; gateway/insight/cache_diagnosis.py): what the x-radixgate-cache-diagnosis header
says of one request and the request log's miss_cause records, the doctor says of many.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from gateway.db import doctor_queries, insight_queries
from gateway.db.doctor_queries import LossGroup, SharedKey, TtftFit
from gateway.db.models import Tenant
from gateway.doctor.fixes import COUNTERFACTUALS, DIAGNOSIS_REASONS, CauseFacts, describe_cause

SPEEDUP_MODEL = "prefill time ~ uncached prompt tokens (summed over the window's requests)"
TTFT_MODEL = "TTFT = a + b x uncached tokens, least squares over the tenant's own completed requests"


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
    reason: str = ""  # the per-request diagnosis reason this cause sums up (fixes.DIAGNOSIS_REASONS)


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
    session: Session, tenant_id: int, since: datetime | None = None, until: datetime | None = None,
    *, names_other_tenants: bool = True,
) -> Diagnosis:
    """Diagnose one tenant's request log in [since, until). Raises LookupError for an unknown tenant.

    With names_other_tenants=False (the tenant's own view) no text names or hashes another
    tenant's prompts: the isolation cause says only how many other tenants share the prefix."""
    tenant = session.get(Tenant, tenant_id)
    if tenant is None:
        raise LookupError(f"no tenant with id {tenant_id}")
    window = (tenant_id, since, until)
    groups = doctor_queries.loss_groups(session, *window)
    shared_keys = doctor_queries.shared_by_system_key(session, *window)
    sightings = insight_queries.find_system_sightings(session, tenant_id, {k.system_key for k in shared_keys}, until)
    pins = insight_queries.list_pins(session, tenant_id, is_active_only=True)
    facts = CauseFacts(tenant=tenant, groups=groups, num_active_pins=len(pins),
                       num_tool_lists=doctor_queries.count_tool_lists(session, *window),
                       names_other_tenants=names_other_tenants)
    for patterns, count in doctor_queries.pattern_counts(session, *window).items():
        facts.note_patterns(patterns, count)
    return diagnose_groups(
        tenant, groups, isolated_keys(shared_keys, sightings, tenant.cache_group, facts), facts,
        num_requests=doctor_queries.count_requests(session, *window), fit=doctor_queries.ttft_fit(session, *window),
    )


def diagnose_groups(
    tenant, groups: list[LossGroup], isolated: list[SharedKey], facts: CauseFacts, *, num_requests: int,
    fit: TtftFit | None = None,
) -> Diagnosis:
    """The analysis behind `diagnose`, on the loss groups already summed."""
    lost, requests = attribute(groups, isolated)
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


def isolated_keys(shared_keys: list[SharedKey], sightings: dict, cache_group: str | None, facts: CauseFacts) -> list:
    """The system prefixes another tenant outside `cache_group` sent (canonical order) before this tenant did."""
    isolated = []
    for key in shared_keys:
        earlier = [s for s in sightings.get(key.system_key, []) if s.first_seen <= key.first_seen]
        outside = [s for s in earlier if cache_group is None or s.cache_group != cache_group]
        if outside:
            facts.note_isolation(key.system_key, outside)
            isolated.append(key)
    return isolated


def attribute(groups: list[LossGroup], isolated: list[SharedKey]) -> tuple[Counter, Counter]:
    """Lost tokens and losing requests per cause (rules in the module docstring). The isolated
    system prefixes' part of the cold loss is isolation's; the rest stays with the cold causes."""
    lost: Counter = Counter()
    requests: Counter = Counter()

    def add(code: str, tokens: int, num_requests: int) -> None:
        if tokens > 0:
            lost[code] += tokens
            requests[code] += num_requests

    cold, cold_requests = Counter(), Counter()
    for g in groups:
        add("eviction", g.eviction, g.num_eviction)
        if g.order_cause is not None:
            add(g.order_cause, g.order, g.num_order)
        cold[g.cold_cause] += g.cold
        cold_requests[g.cold_cause] += g.num_cold
    shared = sum(k.shared for k in isolated)
    add("isolation", shared, sum(k.num_shared for k in isolated))
    moved = sum(k.num_shared - k.num_cold_beyond_shared for k in isolated)  # rows isolation explains whole
    for code in ("cold_start", "tools_vary"):  # isolation's tokens come out of the cold causes, cold_start first
        taken = min(shared, cold[code])
        num_taken = min(moved, cold_requests[code]) if taken else 0
        shared, moved = shared - taken, moved - num_taken
        add(code, cold[code] - taken, cold_requests[code] - num_taken)
    return lost, requests


def build_cause(code: str, lost: int, total_lost: int, num_requests: int, facts: CauseFacts, speedup) -> Cause:
    title, detail, fix = describe_cause(code, facts)
    share = lost / total_lost if total_lost else 0.0
    return Cause(code, title, lost, share, num_requests, detail, fix, COUNTERFACTUALS[code], speedup,
                 DIAGNOSIS_REASONS[code])


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
