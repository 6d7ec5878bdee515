"""The stats queries on SQLite and PostgreSQL agree with a plain-Python reference computed from the
same rows: token-weighted rates, UTC buckets, window bounds, TTFT percentiles, lost tokens by cause."""

from __future__ import annotations

import random
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import event, insert, select

from gateway.db import RequestLog, Tenant, make_engine, make_session_factory, migrate, stats_queries as queries
from gateway.db import ttft_percentiles as percentiles
from gateway.db.percentile import percentile_cont
from gateway.db.rollup import dimension_columns, sum_columns

T0 = datetime(2026, 3, 1, 0, 0, tzinfo=timezone.utc)
CAUSES = (None, "system", "tools", "context", "question")


def make_rows(num_rows: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(num_rows):
        prompt = rng.randint(10, 500)
        cached = rng.randint(0, prompt)
        is_ok = rng.random() < 0.85
        rows.append({
            "id": uuid.uuid4(),
            "created_at": T0 + timedelta(minutes=rng.randint(0, 3 * 24 * 60 - 1), seconds=rng.random()),
            "tenant_id": rng.choice((1, 1, 2)),
            "template": rng.choice(("agent", "rag", None)),
            "prompt_tokens": prompt,
            "cached_tokens": cached,
            "completion_tokens": rng.randint(1, 30),
            "shadow_cached_tokens": rng.choice((None, rng.randint(0, prompt))),
            "ttft_ms": rng.choice((None, round(rng.uniform(1, 300), 3))),
            "latency_ms": 100.0,
            "status": "ok" if is_ok else "error",
            "error_code": None if is_ok else rng.choice(("engine_overloaded", None)),
            "miss_cause": rng.choice(CAUSES),
            "dynamic_hoisted": False, "was_canonical": False, "canonicalized": True,
        })
    return rows


def reference(rows: list[dict]) -> dict:
    prompt = sum(r["prompt_tokens"] for r in rows)
    shadow_rows = [r for r in rows if r["shadow_cached_tokens"] is not None]
    shadow_prompt = sum(r["prompt_tokens"] for r in shadow_rows)
    ttfts = sorted(r["ttft_ms"] for r in rows if r["ttft_ms"] is not None)
    return {
        "requests": len(rows),
        "prompt_tokens": prompt,
        "cached_tokens": sum(r["cached_tokens"] for r in rows),
        "errors": sum(r["status"] != "ok" for r in rows),
        "hit_rate": sum(r["cached_tokens"] for r in rows) / prompt if prompt else None,
        "raw_hit_rate": sum(r["shadow_cached_tokens"] for r in shadow_rows) / shadow_prompt if shadow_prompt else None,
        "ttft_p50_ms": percentile_cont(ttfts, 0.5),
        "ttft_p95_ms": percentile_cont(ttfts, 0.95),
    }


@pytest.fixture
def seeded(migrated_url):  # noqa: F811
    engine = make_engine(migrated_url)
    factory = make_session_factory(engine)
    rows = make_rows(600)
    with factory.begin() as session:
        session.add_all([Tenant(id=1, name="acme"), Tenant(id=2, name="zen")])
        session.flush()
        session.execute(insert(RequestLog), rows)
    with factory() as session:
        commits = []
        event.listen(session, "after_commit", lambda s: commits.append(s))
        yield session, rows
        assert commits == [], "query functions must never commit"
    engine.dispose()


def in_window(rows, tenant_id=None, since=None, until=None):
    return [r for r in rows if (tenant_id is None or r["tenant_id"] == tenant_id)
            and (since is None or r["created_at"] >= since) and (until is None or r["created_at"] < until)]


def assert_matches(got: dict, expected: dict) -> None:
    for key, value in expected.items():
        assert got[key] == (value if value is None else pytest.approx(value, rel=1e-9, abs=1e-9)), key


def test_tenant_stats_totals_and_percentiles_match_the_reference(seeded):
    session, rows = seeded
    since, until = T0 + timedelta(hours=5), T0 + timedelta(days=2, hours=3)
    stats = queries.tenant_stats(session, 1, since, until, "hour")
    assert_matches(stats, reference(in_window(rows, 1, since, until)))
    assert isinstance(stats["prompt_tokens"], int) and isinstance(stats["cached_tokens"], int)


@pytest.mark.parametrize("fetch_max_values", [0, 10**9], ids=["rank-walk", "fetch-and-sort"])
def test_ttft_percentiles_are_exact_whichever_way_they_are_computed(seeded, monkeypatch, fetch_max_values):
    session, rows = seeded
    monkeypatch.setattr(percentiles, "FETCH_MAX_VALUES", fetch_max_values)
    since, until = T0 + timedelta(hours=7, minutes=13), T0 + timedelta(days=1, hours=20)
    for tenant_id in (1, 2):
        expected = reference(in_window(rows, tenant_id, since, until))
        got = percentiles.ttft_percentiles(session, tenant_id, since, until)
        assert got == {k: pytest.approx(expected[k]) for k in ("ttft_p50_ms", "ttft_p95_ms")}
    by_tenant = percentiles.ttft_percentiles_by_tenant(session, since, until)
    assert by_tenant[2]["ttft_p95_ms"] == pytest.approx(reference(in_window(rows, 2, since, until))["ttft_p95_ms"])


def test_window_is_inclusive_at_since_and_exclusive_at_until(seeded):
    session, rows = seeded
    edge = sorted(r["created_at"] for r in rows if r["tenant_id"] == 1)[100]
    before = queries.totals(session, 1, None, edge)["requests"]
    after = queries.totals(session, 1, edge, None)["requests"]
    assert before == len(in_window(rows, 1, None, edge))
    assert before + after == len(in_window(rows, 1))


@pytest.mark.parametrize("bucket, width", [("hour", timedelta(hours=1)), ("day", timedelta(days=1))])
def test_series_buckets_are_utc_aligned_and_sum_to_the_totals(seeded, bucket, width):
    session, rows = seeded
    series = queries.hit_rate_series(session, None, None, None, bucket)
    assert [p["bucket_start"] for p in series] == sorted(p["bucket_start"] for p in series)
    for point in series:
        start = point["bucket_start"]
        assert start.tzinfo is not None and (start - T0) % width == timedelta(0)
        assert_matches(point, {k: v for k, v in reference(in_window(rows, None, start, start + width)).items()
                               if not k.startswith("ttft")})
    assert sum(p["requests"] for p in series) == len(rows)


def test_by_template_and_errors_by_code(seeded):
    session, rows = seeded
    stats = queries.tenant_stats(session, 2, None, None, "day")
    tenant_rows = in_window(rows, 2)
    for entry in stats["by_template"]:
        expected = reference([r for r in tenant_rows if r["template"] == entry["template"]])
        assert_matches(entry, {k: v for k, v in expected.items() if not k.startswith("ttft")})
    errors = {}
    for r in tenant_rows:
        if r["status"] != "ok":
            errors[r["error_code"] or "unknown"] = errors.get(r["error_code"] or "unknown", 0) + 1
    assert stats["errors_by_code"] == errors == queries.errors_by_code(session, 2, None, None)


def test_lost_tokens_by_cause_ranks_attributed_misses(seeded):
    session, rows = seeded
    got = queries.lost_tokens_by_cause(session, 1, None, None)
    expected = {}
    for r in in_window(rows, 1):
        if r["miss_cause"]:
            expected[r["miss_cause"]] = expected.get(r["miss_cause"], 0) + r["prompt_tokens"] - r["cached_tokens"]
    assert {row["cause"]: row["lost_tokens"] for row in got} == expected
    assert [row["lost_tokens"] for row in got] == sorted(expected.values(), reverse=True)
    assert sum(row["share"] for row in got) == pytest.approx(1.0)


def test_all_tenant_stats_lists_each_tenant_with_its_name(seeded):
    session, rows = seeded
    got = queries.all_tenant_stats(session, None, None)
    assert [row["tenant"] for row in got] == ["acme", "zen"]
    for row in got:
        assert_matches(row, reference(in_window(rows, row["tenant_id"])))


def test_empty_window_gives_zero_counts_and_no_rates(seeded):
    session, _ = seeded
    far = T0 + timedelta(days=365)
    stats = queries.tenant_stats(session, 1, far, far + timedelta(days=1), "day")
    assert stats["requests"] == 0 and stats["hit_rate"] is None and stats["ttft_p50_ms"] is None
    assert stats["series"] == [] and stats["by_template"] == [] and stats["lost_tokens_by_cause"] == []
    assert queries.all_tenant_stats(session, far, None) == []


def test_unknown_bucket_is_rejected(seeded):
    session, _ = seeded
    with pytest.raises(ValueError):
        queries.hit_rate_series(session, 1, None, None, "week")


@pytest.mark.parametrize("tenant_id, dims, index", [
    (1, ("bucket", "template", "miss_cause", "error_code"), "ix_request_log_tenant_created"),
    (None, ("tenant_id",), "ix_request_log_created"),
    (None, ("bucket",), "ix_request_log_created"),
])
def test_sqlite_stats_scans_read_only_a_covering_index(tmp_path, tenant_id, dims, index):
    """The 1M-row speed rests on this: the stats scans never touch the wide table rows."""
    url = f"sqlite:///{tmp_path / 'plan.db'}"
    migrate.upgrade(url)
    engine = make_engine(url)
    with make_session_factory(engine)() as session:
        columns = dimension_columns(session, dims, "hour")
        query = select(*columns, *sum_columns()).where(*queries.window(tenant_id, T0, T0 + timedelta(days=1)))
        sql = str(query.group_by(*columns).compile(engine, compile_kwargs={"literal_binds": True}))
        plan = " ".join(row[-1] for row in session.connection().exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
    engine.dispose()
    assert f"USING COVERING INDEX {index}" in plan


def rolled(rows: list[dict], dims: tuple[str, ...]) -> dict:
    from gateway.db.rollup import rollup

    return rollup(rows, dims)


def test_the_hourly_rollup_gives_the_sums_of_the_rows_for_any_window(seeded):
    """Whole hours from the trigger-kept roll-up plus partial edge hours from rows == rows alone."""
    session, _ = seeded
    rng = random.Random(3)
    windows = [(None, None), (T0 + timedelta(hours=5), T0 + timedelta(hours=9)),  # aligned
               (T0 + timedelta(hours=2, minutes=7), T0 + timedelta(hours=2, minutes=50)),  # inside one hour
               (T0 + timedelta(hours=1, minutes=30), None), (None, T0 + timedelta(days=1, minutes=1))]
    for _ in range(8):
        start = T0 + timedelta(minutes=rng.randint(0, 3 * 24 * 60), seconds=rng.random())
        windows.append((start, start + timedelta(minutes=rng.randint(1, 40 * 60))))
    for since, until in windows:
        for tenant_id in (None, 1):
            for dims, bucket in [((), "hour"), (("tenant_id", "template", "miss_cause", "error_code"), "hour"),
                                 (("bucket",), "hour"), (("bucket", "template"), "day"), (("tenant_id",), "hour"),
                                 (("bucket", "tenant_id"), "day")]:
                got = rolled(queries.aggregate(session, tenant_id, since, until, dims, bucket), dims)
                want = rolled(queries.raw_aggregate(session, tenant_id, since, until, dims, bucket), dims)
                assert got == want, (since, until, tenant_id, dims, bucket)
            assert_prefill_model_matches_rows(session, since, until, tenant_id)


def assert_prefill_model_matches_rows(session, since, until, tenant_id) -> None:
    """The cost model read from the tenant-hour roll-up (+ edges) == the model fitted to rows."""
    from gateway.db.insight_queries import prefill_ms_per_token, raw_prefill_sums

    total_ms, total_tokens = raw_prefill_sums(session, since, until, tenant_id)
    want = total_ms / total_tokens if total_tokens else 0.0
    assert prefill_ms_per_token(session, since, until, tenant_id) == pytest.approx(want, rel=1e-9), (since, until)


def test_migrating_a_populated_log_backfills_the_tenant_hour_rollup(db_url):  # noqa: F811
    """0013 on a log written at 0012: the roll-up it back-fills gives the rows' own sums, and the
    trigger it creates keeps adding rows logged afterwards."""
    migrate.upgrade(db_url, "0012")
    engine = make_engine(db_url)
    factory = make_session_factory(engine)
    rows = make_rows(200, seed=13)
    try:
        with factory.begin() as session:
            session.add_all([Tenant(id=1, name="acme"), Tenant(id=2, name="zen")])
            session.flush()
            session.execute(insert(RequestLog), rows[:150])
        migrate.upgrade(db_url)
        with factory.begin() as session:
            session.execute(insert(RequestLog), rows[150:])
        with factory() as session:
            dims = ("bucket", "tenant_id")
            assert (rolled(queries.aggregate(session, None, None, None, dims, "day"), dims)
                    == rolled(queries.raw_aggregate(session, None, None, None, dims, "day"), dims))
            assert queries.totals(session, None, None, None)["requests"] == 200
            assert_prefill_model_matches_rows(session, None, None, None)
    finally:
        engine.dispose()


def test_a_row_the_log_writer_retries_is_rolled_up_once(migrated_url):  # noqa: F811
    from gateway.db.log_insert import insert_ignoring_duplicates

    engine = make_engine(migrated_url)
    factory = make_session_factory(engine)
    rows = make_rows(20, seed=11)
    for _ in range(2):  # the same batch twice: a retry after a lost acknowledgement
        with factory.begin() as session:
            session.execute(insert_ignoring_duplicates(engine.dialect.name), rows)
    with factory() as session:
        assert queries.totals(session, None, None, None)["requests"] == 20
        assert queries.totals(session, None, None, None)["prompt_tokens"] == sum(r["prompt_tokens"] for r in rows)
    engine.dispose()


def test_unbounded_percentiles_walk_the_index_and_stay_exact(seeded):
    session, rows = seeded
    for tenant_id in (1, 2):
        expected = reference(in_window(rows, tenant_id))
        got = percentiles.ttft_percentiles_by_tenant(session, None, None)[tenant_id]
        assert got == {k: pytest.approx(expected[k]) for k in ("ttft_p50_ms", "ttft_p95_ms")}
