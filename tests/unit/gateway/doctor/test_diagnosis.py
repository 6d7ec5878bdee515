"""The cache doctor ranks the known cause first on seeded logs, from the measured counterfactuals,
and its numbers add up."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from gateway.doctor.diagnosis import diagnose
from gateway.db.doctor_queries import TtftFit
from gateway.db.models import Base, Tenant
from gateway.db.session import make_engine, make_session_factory
from tests.support.dashboard_seed import EXPECTED_TOP_CAUSE, log, seed

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


def test_doctor_counts_lost_tokens_from_the_canonical_counterfactual(session):
    diagnosis = diagnose(session, tenant_id(session, "globex"))
    by_code = {cause.code: cause for cause in diagnosis.causes}
    # 30 requests: first cold (960 lost); i % 10 == 1 hit 960; the other 26 hit 64 where the
    # canonical order (date hoisted) hits the 960-token static prefix.
    assert by_code["dynamic_content"].lost_tokens == 26 * (960 - 64)
    assert by_code["dynamic_content"].num_requests == 26
    assert by_code["cold_start"].lost_tokens == 960
    assert "date_iso" in by_code["dynamic_content"].detail
    assert "date_iso" in by_code["dynamic_content"].fix
    assert diagnosis.canonical_hit_rate == pytest.approx(29 * 960 / (30 * 1200))
    assert diagnosis.attainable_hit_rate == diagnosis.canonical_hit_rate


def test_canonicalize_speedup_is_the_uncached_ratio_of_the_canonical_order(session):
    diagnosis = diagnose(session, tenant_id(session, "globex"))
    before = 1200 + 3 * (1200 - 960) + 26 * (1200 - 64)
    after = 1200 + 29 * (1200 - 960)  # the canonical order's uncached tokens
    speedup = diagnosis.canonicalize_speedup
    assert speedup.uncached_tokens_before == before and speedup.uncached_tokens_after == after
    assert speedup.speedup == pytest.approx(before / after)
    assert diagnosis.causes[0].speedup == pytest.approx(before / after)  # the only ordering cause


def test_doctor_names_the_tenants_that_could_share_a_cache_group(session):
    diagnosis = diagnose(session, tenant_id(session, "umbrella"))
    top, rest = diagnosis.causes
    # the first request's 800-token system prefix was in acme's cache already; the three
    # 100-token contexts were new to every cache
    assert top.code == "isolation" and top.lost_tokens == 800 and top.share == pytest.approx(800 / 1100)
    assert rest.code == "cold_start" and rest.lost_tokens == 300
    assert "acme" in top.detail and "cache_group" in top.fix and "cache group" in top.counterfactual


def test_eviction_speedup_comes_from_the_unbounded_cache(session):
    diagnosis = diagnose(session, tenant_id(session, "initech"))
    speedup = diagnosis.speedup
    uncached = sum(800 - (512 if i % 5 == 1 else 0) for i in range(30))
    eviction = diagnosis.causes[0]  # 30 requests: 1 cold, 6 hits, 23 evicted repeats
    assert eviction.code == "eviction" and eviction.lost_tokens == 23 * 512
    assert speedup.uncached_tokens_before == uncached
    assert speedup.uncached_tokens_after == uncached - 23 * 512
    assert speedup.speedup == pytest.approx(uncached / (uncached - 23 * 512)) == eviction.speedup
    assert "uncached" in speedup.model and "TTFT" in speedup.ttft_model
    assert diagnosis.canonicalize_speedup is None  # no raw-order traffic


def test_ttft_speedup_uses_the_tenants_own_ttft_line(session):
    diagnosis = diagnose(session, tenant_id(session, "initech"))
    # seeded TTFTs: 200 ms with 800 uncached tokens, 40 ms with 288: the line through both
    # crosses zero at 160 tokens, so its fixed part is clamped to 0 ms
    slope = (200 - 40) / (800 - 288)
    intercept = 0.0
    assert diagnosis.ttft_line_ms == pytest.approx((intercept, slope))
    speedup = diagnosis.speedup
    expected = (30 * intercept + slope * speedup.uncached_tokens_before) / (
        30 * intercept + slope * speedup.uncached_tokens_after)
    assert speedup.ttft_speedup == pytest.approx(expected)


def test_doctor_reports_canonical_and_raw_hit_rates(session):
    diagnosis = diagnose(session, tenant_id(session, "acme"))
    assert diagnosis.hit_rate == pytest.approx(39 * 800 / 40_000)
    assert diagnosis.canonical_hit_rate == pytest.approx(39 * 800 / 40_000)
    assert diagnosis.raw_hit_rate == pytest.approx(39 * 96 / 40_000)
    assert diagnosis.to_dict()["attainable_hit_rate"] == diagnosis.to_dict()["canonical_hit_rate"]


def test_doctor_on_a_tenant_without_traffic_finds_no_cause(session):
    quiet = Tenant(name="quiet")
    session.add(quiet)
    session.flush()
    diagnosis = diagnose(session, quiet.id)
    assert diagnosis.num_requests == 0 and diagnosis.causes == [] and diagnosis.speedup is None


def test_doctor_rejects_an_unknown_tenant(session):
    with pytest.raises(LookupError):
        diagnose(session, 9999)


def test_rows_without_counterfactuals_lose_nothing(session):
    old = Tenant(name="before-0003")
    session.add(old)
    session.flush()
    start = NOW - timedelta(hours=1)
    session.add_all(log(old, start + timedelta(minutes=i), 1000, 0, canonical_cached_tokens=None,
                        canonical_prompt_tokens=None, static_prefix_tokens=None, system_prefix_tokens=None)
                    for i in range(3))
    session.flush()
    diagnosis = diagnose(session, old.id)
    assert diagnosis.causes == [] and diagnosis.num_requests == 3


def raw_rows(tenant: Tenant, **columns) -> list:
    """A raw-order tenant: 1 cold request, then 5 repeats that got 100 where the canonical order gets 700."""
    start = NOW - timedelta(hours=1)
    base = dict(canonicalized=False, system_hash="s", tools_hash="t", static_prefix_tokens=700,
                system_prefix_tokens=700, sections_found="system,tools,question")
    rows = [log(tenant, start, 1000, 0, **base)]
    for i in range(1, 6):
        rows.append(log(tenant, start + timedelta(minutes=i), 1000, 100, canonical_cached_tokens=700,
                        **{**base, **columns}))
    return rows


@pytest.mark.parametrize(
    ("columns", "code"),
    [
        (dict(was_canonical=False, sections_found="system,context,question"), "context_first"),
        (dict(was_canonical=False, sections_found="system,tools,question"), "tools_vary"),
        (dict(was_canonical=False, sections_found="system,question"), "section_order"),
        (dict(was_canonical=True, sections_found="system,tools,question"), "section_order"),
        (dict(was_canonical=False, dynamic_patterns="uuid"), "dynamic_content"),
    ],
)
def test_raw_order_losses_are_attributed_to_the_client_layout(session, columns, code):
    tenant = Tenant(name=f"raw-{code}-{len(columns)}")
    session.add(tenant)
    session.flush()
    session.add_all(raw_rows(tenant, **columns))
    session.flush()
    diagnosis = diagnose(session, tenant.id)
    assert diagnosis.causes[0].code == code
    assert diagnosis.causes[0].lost_tokens == 5 * 600


def test_raw_order_eviction_comes_from_the_raw_shadow(session):
    tenant = Tenant(name="raw-evicted")
    session.add(tenant)
    session.flush()
    # the raw order on an unbounded cache would have hit 700 (shadow); the engine had evicted it
    session.add_all(raw_rows(tenant, shadow_cached_tokens=700, was_canonical=True))
    session.flush()
    by_code = {cause.code: cause for cause in diagnose(session, tenant.id).causes}
    assert by_code["eviction"].lost_tokens == 5 * 600 and "section_order" not in by_code


def test_ttft_fit_needs_a_rising_line():
    assert TtftFit(n=2, sum_x=10, sum_y=10, sum_xx=50, sum_xy=50).line() is None
    assert TtftFit(n=3, sum_x=30, sum_y=30, sum_xx=300, sum_xy=300).line() is None  # one x value
    assert TtftFit(n=3, sum_x=6, sum_y=6, sum_xx=14, sum_xy=10).line() is None  # falling
    # (1, 3), (2, 5), (3, 7): TTFT = 1 + 2 x
    assert TtftFit(n=3, sum_x=6, sum_y=15, sum_xx=14, sum_xy=34).line() == pytest.approx((1.0, 2.0))
    # (1, 1), (3, 9): the line crosses zero before x = 0; the fixed part is clamped to 0 ms
    assert TtftFit(n=3, sum_x=7, sum_y=19, sum_xx=19, sum_xy=91).line()[0] == 0.0


def test_prefill_cost_is_ttft_per_uncached_token(session):
    from sqlalchemy import select

    from gateway.db.insight_queries import prefill_ms_per_token
    from gateway.db.models import RequestLog as R

    rows = session.execute(select(R.ttft_ms, R.prompt_tokens, R.cached_tokens).where(
        R.status == "ok", R.prompt_tokens > R.cached_tokens)).all()
    expected = sum(r.ttft_ms for r in rows) / sum(r.prompt_tokens - r.cached_tokens for r in rows)
    assert prefill_ms_per_token(session, None, None) == pytest.approx(expected)


def test_shared_keys_are_one_tenants_first_sightings_per_system_prefix(session):
    """Whatever the window (unbounded, as the CLI reads it, or bounded): rows without a system hash
    or without a shared gain, and other tenants' rows, make no key; each (system, tools) pair is one."""
    from gateway.db.doctor_queries import shared_by_system_key
    from tests.support.dashboard_seed import log as log_row

    first, other = Tenant(name="first", pin_quota_tokens=0), Tenant(name="other", pin_quota_tokens=0)
    session.add_all([first, other])
    session.flush()
    cold = dict(system_prefix_tokens=300, static_prefix_tokens=300, canonical_cached_tokens=0)
    at = NOW - timedelta(hours=2)
    session.add_all([
        log_row(first, at, 500, 0, system_hash="s1", tools_hash="t1", **cold),
        log_row(first, at + timedelta(minutes=1), 500, 100, system_hash="s1", tools_hash="t1", **cold),
        log_row(first, at + timedelta(minutes=2), 500, 0, system_hash="s1", tools_hash=None, **cold),
        log_row(first, at + timedelta(minutes=3), 500, 0, system_hash=None, tools_hash="t1", **cold),
        log_row(first, at + timedelta(minutes=4), 500, 400, system_hash="s2", tools_hash=None, **cold),  # no gain
        log_row(other, at - timedelta(minutes=5), 500, 0, system_hash="s1", tools_hash="t1", **cold),
    ])
    session.flush()
    for window in ((None, None), (NOW - timedelta(hours=3), NOW)):
        keys = {key.system_key: key for key in shared_by_system_key(session, first.id, *window)}
        assert set(keys) == {("s1", None), ("s1", "t1")}
        assert (keys[("s1", "t1")].shared, keys[("s1", "t1")].num_shared) == (300 + 200, 2)
        assert keys[("s1", "t1")].first_seen == at
        assert (keys[("s1", None)].shared, keys[("s1", None)].num_shared) == (300, 1)
