"""The cache doctor's SQL: one tenant's window aggregated into the measured counterfactuals.

Every request-log row carries what it got (`cached_tokens`), what the client's raw order would
have got on an unbounded cache (`shadow_cached_tokens`), what the canonical order would have got
on an unbounded cache of the domain's traffic (`canonical_cached_tokens` of
`canonical_prompt_tokens`), and the canonical static prefix (`static_prefix_tokens`, its
system + tools part `system_prefix_tokens`). Per row, in tokens that had to be prefilled
(uncached = prompt - cached), the counterfactual that removes each kind of loss gains:

    eviction    canonicalized: canonical - cached       raw: shadow - cached
                (the same order on an unbounded cache)
    order       raw only: (prompt - max(shadow, cached)) - (canonical_prompt - canonical)
                (the canonical order instead of the client's, both unbounded)
    cold        min(static, canonical_prompt) - max(canonical, cached)
                (the static prefix already cached: pinned or warmed before first use)
    shared      the same with the system prefix only: what one cache group would have held

each clamped at 0. Rows without a canonical figure (written before it existed, or with the
canonical shadow off) count the canonical order as what they got, so they gain nothing.

`loss_groups` names each row's ordering and cold causes in SQL (the rules of gateway/doctor/diagnosis.py)
and sums the gains (and counts the rows with each) per pair of names: one GROUP BY over the
tenant's window that reads only the ix_request_log_doctor index, so a handful of groups come back
to Python whatever the window's size. `shared_by_system_key` and `pattern_counts` fetch the few
rows behind the isolation and dynamic-content figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Float, and_, case, cast, func, literal, select
from sqlalchemy.orm import Session

from gateway.db.hourly import split_window
from gateway.db.models import DoctorHourly as D
from gateway.db.models import RequestLog as R
from gateway.db.rollup import window

SUMS = ("requests", "prompt_tokens", "cached_tokens", "uncached_tokens", "raw_cached_tokens",
        "canonical_cached_tokens", "canonical_prompt_tokens", "eviction", "order", "cold", "shared",
        "num_eviction", "num_order", "num_cold", "num_shared", "num_cold_beyond_shared")


@dataclass(frozen=True)
class LossGroup:
    """Summed counterfactual gains (see the module docstring) of rows whose raw order loses to
    `order_cause` (None: canonicalized rows) and whose cold static prefix is `cold_cause`'s."""

    order_cause: str | None
    cold_cause: str
    requests: int
    prompt_tokens: int
    cached_tokens: int
    uncached_tokens: int
    raw_cached_tokens: int
    canonical_cached_tokens: int
    canonical_prompt_tokens: int
    eviction: int
    order: int
    cold: int
    shared: int
    num_eviction: int  # rows with an eviction gain; likewise for the other gains
    num_order: int
    num_cold: int
    num_shared: int
    num_cold_beyond_shared: int


@dataclass(frozen=True)
class SharedKey:
    """A system prefix (system_hash, tools_hash) that was new to the tenant's cache domain."""

    system_hash: str | None
    tools_hash: str | None
    first_seen: datetime
    shared: int  # its summed `shared` gain
    num_shared: int
    num_cold_beyond_shared: int

    @property
    def system_key(self) -> tuple:
        return (self.system_hash, self.tools_hash)


@dataclass(frozen=True)
class TtftFit:
    """Least-squares sums of TTFT (ms) against uncached tokens over completed requests."""

    n: int
    sum_x: float
    sum_y: float
    sum_xx: float
    sum_xy: float

    def line(self) -> tuple[float, float] | None:
        """(intercept ms, ms per uncached token), or None when the fit is undetermined or not rising."""
        denominator = self.n * self.sum_xx - self.sum_x**2
        if self.n < 3 or denominator <= 0:
            return None
        slope = (self.n * self.sum_xy - self.sum_x * self.sum_y) / denominator
        if slope <= 0:
            return None
        return max(0.0, (self.sum_y - slope * self.sum_x) / self.n), slope


def larger(a, b):
    return case((a >= b, a), else_=b)


def smaller(a, b):
    return case((a <= b, a), else_=b)


def positive(value):
    return case((value > 0, value), else_=0)


def gains() -> dict:
    """The per-row gains of the module docstring, as SQL expressions."""
    canonical = func.coalesce(R.canonical_cached_tokens, R.cached_tokens)
    canonical_prompt = func.coalesce(R.canonical_prompt_tokens, R.prompt_tokens)
    shadow = func.coalesce(R.shadow_cached_tokens, R.cached_tokens)
    is_canonical = R.canonicalized.is_(True)
    eviction = case((is_canonical, positive(canonical - R.cached_tokens)), else_=positive(shadow - R.cached_tokens))
    raw_uncached = R.prompt_tokens - larger(shadow, R.cached_tokens)
    order = case((is_canonical, 0), else_=positive(raw_uncached - (canonical_prompt - canonical)))
    best = larger(canonical, R.cached_tokens)
    cold = positive(smaller(func.coalesce(R.static_prefix_tokens, 0), canonical_prompt) - best)
    shared = positive(smaller(func.coalesce(R.system_prefix_tokens, 0), canonical_prompt) - best)
    return {"canonical": canonical, "canonical_prompt": canonical_prompt, "shadow": shadow, "eviction": eviction,
            "order": order, "cold": cold, "shared": shared}


def order_cause():
    """The ordering cause a raw row's loss is named after, from its signals (None: canonicalized)."""
    found = func.coalesce(R.sections_found, "")
    is_layout_off = R.was_canonical.is_(False)
    return case(
        (R.canonicalized.is_(True), None),
        (R.dynamic_patterns.is_not(None), "dynamic_content"),
        (and_(is_layout_off, found.like("%context%")), "context_first"),
        (and_(is_layout_off, found.like("%tools%")), "tools_vary"),
        else_="section_order",
    )


def cold_cause():
    """A cold static prefix is a changed tool list where the miss attribution says so."""
    return case((R.miss_cause.in_(("tools", "tools_changed")), "tools_vary"), else_="cold_start")  # attributor, diagnosis


def row_sums() -> dict:
    """Per request-log row, what each of SUMS adds for it (1 for `requests`): loss_groups sums
    these over rows, the doctor's hourly roll-up (gateway/db/doctor_hourly.py) adds them up per row."""
    g = gains()
    canonical, canonical_prompt, shadow = g["canonical"], g["canonical_prompt"], g["shadow"]
    eviction, order, cold, shared = g["eviction"], g["order"], g["cold"], g["shared"]
    raw_cached = case((R.canonicalized.is_(True), shadow), else_=R.cached_tokens)
    sums = {
        "requests": literal(1),
        "prompt_tokens": R.prompt_tokens,
        "cached_tokens": R.cached_tokens,
        "uncached_tokens": R.prompt_tokens - R.cached_tokens,
        "raw_cached_tokens": raw_cached,
        "canonical_cached_tokens": canonical,
        "canonical_prompt_tokens": canonical_prompt,
        "eviction": eviction,
        "order": order,
        "cold": cold,
        "shared": shared,
    }
    for name, gain in (("eviction", eviction), ("order", order), ("cold", cold), ("shared", shared)):
        sums[f"num_{name}"] = case((gain > 0, 1), else_=0)
    sums["num_cold_beyond_shared"] = case((cold > shared, 1), else_=0)
    return {name: sums[name] for name in SUMS}


def gain_columns() -> list:
    """The gains summed and counted, labelled as in SUMS."""
    return [func.coalesce(func.sum(expression), 0).label(name) for name, expression in row_sums().items()]


def loss_groups(session: Session, tenant_id: int, since: datetime | None, until: datetime | None) -> list[LossGroup]:
    """The tenant's rows with prompt tokens in [since, until), summed per (order cause, cold cause):
    the window's whole UTC hours from the doctor's roll-up (gateway/db/doctor_hourly.py), a partial
    first and last hour from rows."""
    hours, edges = split_window(since, until)
    parts = [] if hours is None else [hourly_loss_groups(session, tenant_id, *hours)]
    parts += [raw_loss_groups(session, tenant_id, start, end) for start, end in edges]
    totals: dict[tuple, dict[str, int]] = {}
    for group in (group for part in parts for group in part):
        sums = totals.setdefault((group.order_cause, group.cold_cause), dict.fromkeys(SUMS, 0))
        for name in SUMS:
            sums[name] += getattr(group, name)
    return [LossGroup(order_cause, cold_cause, **sums) for (order_cause, cold_cause), sums in totals.items()]


def raw_loss_groups(session: Session, tenant_id: int, since: datetime | None, until: datetime | None
                    ) -> list[LossGroup]:
    """loss_groups() from request-log rows alone (the reference the roll-up must equal)."""
    causes = [order_cause().label("order_cause"), cold_cause().label("cold_cause")]
    query = (
        select(*causes, *gain_columns())
        .where(*window(tenant_id, since, until), R.prompt_tokens > 0)
        .group_by(*causes)
    )
    return [LossGroup(**row._mapping) for row in session.execute(query)]


def hourly_loss_groups(session: Session, tenant_id: int, first: datetime | None, last: datetime | None
                       ) -> list[LossGroup]:
    """loss_groups() over the doctor's roll-up hours in [first, last)."""
    conditions = window(tenant_id, first, last, D.tenant_id, D.hour)
    query = (
        select(func.nullif(D.order_cause, "").label("order_cause"), D.cold_cause,
               *(func.sum(getattr(D, name)).label(name) for name in SUMS))
        .where(*conditions)
        .group_by(D.order_cause, D.cold_cause)
    )
    return [LossGroup(**{k: (int(v) if k in SUMS else v) for k, v in row._mapping.items()})
            for row in session.execute(query)]


def shared_by_system_key(
    session: Session, tenant_id: int, since: datetime | None, until: datetime | None
) -> list[SharedKey]:
    """Per system prefix of the rows with a `shared` gain (the first sightings of a system prefix in
    the domain): when it was first sent, and its gains."""
    g = gains()
    shared, cold = g["shared"], g["cold"]
    keys = [R.system_hash, R.tools_hash]
    query = (
        select(*keys, func.min(R.created_at).label("first_seen"), func.sum(shared).label("shared"),
               func.count().label("num_shared"), func.sum(case((cold > shared, 1), else_=0)).label("num_cold_beyond_shared"))
        .where(*window(tenant_id, since, until), R.prompt_tokens > 0, shared > 0, R.system_hash.is_not(None))
        .group_by(R.tenant_id, *keys)  # one tenant: the same groups, in an order no index has, so that
    )                                  # SQLite reads the tenant's range of the doctor index, not all system keys
    return [SharedKey(**row._mapping) for row in session.execute(query)]


def pattern_counts(session: Session, tenant_id: int, since: datetime | None, until: datetime | None) -> dict[str, int]:
    """Raw rows that lost tokens to their order, per comma list of dynamic patterns found."""
    query = (
        select(R.dynamic_patterns, func.count())
        .where(*window(tenant_id, since, until), R.prompt_tokens > 0, R.dynamic_patterns.is_not(None),
               gains()["order"] > 0)
        .group_by(R.dynamic_patterns)
    )
    return {patterns: int(count) for patterns, count in session.execute(query)}


def count_tool_lists(session: Session, tenant_id: int, since: datetime | None, until: datetime | None) -> int:
    """Distinct tool lists (tools_hash) the tenant sent in the window."""
    query = select(func.count(func.distinct(R.tools_hash))).where(*window(tenant_id, since, until))
    return int(session.scalar(query) or 0)


def count_requests(session: Session, tenant_id: int, since: datetime | None, until: datetime | None) -> int:
    """All of the tenant's requests in the window, those rejected before tokenization included."""
    return int(session.scalar(select(func.count()).where(*window(tenant_id, since, until))) or 0)


def ttft_fit(session: Session, tenant_id: int, since: datetime | None, until: datetime | None) -> TtftFit:
    """The tenant's own TTFTs against its uncached tokens (completed requests with a TTFT)."""
    x = cast(R.prompt_tokens - R.cached_tokens, Float)
    y = R.ttft_ms
    query = select(func.count(), func.sum(x), func.sum(y), func.sum(x * x), func.sum(x * y)).where(
        *window(tenant_id, since, until), R.status == "ok", R.ttft_ms.is_not(None), R.prompt_tokens > 0
    )
    n, *sums = session.execute(query).one()
    return TtftFit(int(n or 0), *(float(value or 0.0) for value in sums))
