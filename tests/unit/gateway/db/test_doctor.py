"""The cache doctor ranks the known cause first on seeded logs, and its numbers add up."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

from gateway.db.doctor import diagnose, diagnose_rows
from gateway.db.models import Base
from gateway.db.prefix_reuse import LogRow, attainable_tokens, estimate_prefix_tokens
from gateway.db.session import make_engine, make_session_factory
from tests.support.dashboard_seed import EXPECTED_TOP_CAUSE, seed

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)


@pytest.fixture()
def session():
    engine = make_engine("sqlite://")
    Base.metadata.create_all(engine)
    factory = make_session_factory(engine)
    with factory() as session:
        seed(session, NOW)
        yield session
    engine.dispose()


def tenant_id(session, name: str) -> int:
    from gateway.db.insight_queries import find_tenant

    return find_tenant(session, name).id


@pytest.mark.parametrize("name", sorted(EXPECTED_TOP_CAUSE))
def test_doctor_ranks_the_seeded_cause_first(session, name):
    diagnosis = diagnose(session, tenant_id(session, name))
    assert diagnosis.causes[0].code == EXPECTED_TOP_CAUSE[name]
    assert sum(cause.share for cause in diagnosis.causes) == pytest.approx(1.0)
    assert diagnosis.lost_tokens == sum(cause.lost_tokens for cause in diagnosis.causes)


def test_doctor_counts_lost_tokens_exactly_for_dynamic_content(session):
    diagnosis = diagnose(session, tenant_id(session, "globex"))
    by_code = {cause.code: cause for cause in diagnosis.causes}
    # 30 requests: first cold (960 lost); i % 10 == 1 hit 960; the other 26 hit 64 of 960.
    assert by_code["dynamic_content"].lost_tokens == 26 * (960 - 64)
    assert by_code["dynamic_content"].num_requests == 26
    assert by_code["cold_start"].lost_tokens == 960
    assert "date_iso" in by_code["dynamic_content"].detail
    assert "date_iso" in by_code["dynamic_content"].fix


def test_doctor_names_the_tenants_that_could_share_a_cache_group(session):
    diagnosis = diagnose(session, tenant_id(session, "umbrella"))
    top = diagnosis.causes[0]
    assert top.lost_tokens == 3 * 800 and top.share == pytest.approx(1.0)
    assert "acme" in top.detail and "cache_group" in top.fix


def test_doctor_estimates_speedup_from_uncached_tokens(session):
    diagnosis = diagnose(session, tenant_id(session, "initech"))
    speedup = diagnosis.speedup
    uncached = sum(800 - (512 if i % 5 == 1 else 0) for i in range(30))
    eviction = diagnosis.causes[0]  # 30 requests: 1 cold, 6 hits, 23 evicted repeats
    assert eviction.lost_tokens == 23 * 512
    assert speedup.uncached_tokens_before == uncached
    assert speedup.uncached_tokens_after == uncached - 23 * 512
    assert speedup.speedup == pytest.approx(uncached / (uncached - 23 * 512))
    assert speedup.prompt_tokens_p50 == 800 and "uncached" in speedup.model


def test_doctor_reports_attainable_and_raw_hit_rates(session):
    diagnosis = diagnose(session, tenant_id(session, "acme"))
    assert diagnosis.hit_rate == pytest.approx(39 * 800 / 40_000)
    assert diagnosis.attainable_hit_rate == pytest.approx(39 * 800 / 40_000)
    assert diagnosis.raw_hit_rate == pytest.approx(39 * 96 / 40_000)


def test_doctor_on_a_tenant_without_traffic_finds_no_cause(session):
    from gateway.db.models import Tenant

    quiet = Tenant(name="quiet")
    session.add(quiet)
    session.flush()
    diagnosis = diagnose(session, quiet.id)
    assert diagnosis.num_requests == 0 and diagnosis.causes == [] and diagnosis.speedup is None


def test_doctor_rejects_an_unknown_tenant(session):
    with pytest.raises(LookupError):
        diagnose(session, 9999)


def raw_rows(**columns) -> list[LogRow]:
    start = NOW - timedelta(hours=1)
    base = dict(tenant_id=1, prompt_tokens=1000, canonicalized=False, system_hash="s", tools_hash="t")
    rows = [LogRow(created_at=start, cached_tokens=0, **base, sections_found="system,tools,question")]
    rows.append(LogRow(created_at=start + timedelta(minutes=1), cached_tokens=700, **base))
    for i in range(2, 6):
        rows.append(LogRow(created_at=start + timedelta(minutes=i), cached_tokens=100, **{**base, **columns}))
    return rows


@pytest.mark.parametrize(
    ("columns", "code"),
    [
        (dict(was_canonical=False, sections_found="system,context,question"), "context_first"),
        (dict(was_canonical=False, sections_found="system,tools,question"), "tools_vary"),
        (dict(was_canonical=False, sections_found="system,question"), "section_order"),
        (dict(was_canonical=True, sections_found="system,tools,question"), "eviction"),
        (dict(was_canonical=False, dynamic_patterns="uuid"), "dynamic_content"),
    ],
)
def test_raw_order_repeats_are_attributed_to_the_client_layout(columns, code):
    tenant = SimpleNamespace(id=1, name="t", cache_group=None, pin_quota_tokens=0)
    diagnosis = diagnose_rows(tenant, raw_rows(**columns), {})
    assert diagnosis.causes[0].code == code
    assert diagnosis.causes[0].lost_tokens == 4 * 600


def test_attainable_counts_only_repeats_of_a_static_prefix():
    start = NOW
    rows = [
        LogRow(created_at=start, tenant_id=1, prompt_tokens=100, cached_tokens=0, system_hash="a"),
        LogRow(created_at=start + timedelta(seconds=1), tenant_id=1, prompt_tokens=100, cached_tokens=0, system_hash="a"),
        LogRow(created_at=start + timedelta(seconds=2), tenant_id=1, prompt_tokens=100, cached_tokens=64, system_hash="a"),
        LogRow(created_at=start + timedelta(seconds=3), tenant_id=1, prompt_tokens=100, cached_tokens=0, system_hash="b"),
    ]
    estimate = estimate_prefix_tokens(rows)
    assert estimate.tokens_by_key[("a", None, None)] == 64
    # key b never hit: the tenant's median prefix/prompt ratio (0.64) of its shortest prompt
    assert estimate.tokens_by_key[("b", None, None)] == 64 and not estimate.is_assumed
    assert attainable_tokens(rows, estimate) == [0, 64, 64, 0]


def test_sql_attainable_matches_the_python_definition(session):
    from gateway.db.insight_queries import attainable_by_tenant, fetch_log_rows

    by_tenant: dict[int, list[LogRow]] = {}
    for row in fetch_log_rows(session, None):
        if row.prompt_tokens > 0:
            by_tenant.setdefault(row.tenant_id, []).append(row)
    expected = {tid: sum(attainable_tokens(rows)) for tid, rows in by_tenant.items()}
    assert attainable_by_tenant(session, None, None) == expected
    assert len(expected) == len(EXPECTED_TOP_CAUSE)


def test_prefill_cost_is_ttft_per_uncached_token(session):
    from gateway.db.insight_queries import fetch_log_rows, prefill_ms_per_token

    rows = [r for r in fetch_log_rows(session, None) if r.status == "ok" and r.prompt_tokens > r.cached_tokens]
    expected = sum(r.ttft_ms for r in rows) / sum(r.prompt_tokens - r.cached_tokens for r in rows)
    assert prefill_ms_per_token(session, None, None) == pytest.approx(expected)
