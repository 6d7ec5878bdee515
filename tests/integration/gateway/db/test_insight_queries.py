"""The dashboard's and the doctor's queries on a migrated SQLite and PostgreSQL database."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from gateway.db import insight_queries
from gateway.doctor.diagnosis import diagnose
from gateway.db.session import make_engine, make_session_factory, session_scope
from tests.support.dashboard_seed import EXPECTED_TOP_CAUSE, seed

NOW = datetime.now(timezone.utc).replace(microsecond=0)


@pytest.fixture()
def session(migrated_url):  # noqa: F811
    engine = make_engine(migrated_url)
    factory = make_session_factory(engine)
    with session_scope(factory) as writer:
        seed(writer, NOW)
    with factory() as reader:
        yield reader
    engine.dispose()


def test_doctor_ranks_every_seeded_tenant(session):
    for name, code in EXPECTED_TOP_CAUSE.items():
        assert diagnose(session, insight_queries.find_tenant(session, name).id).causes[0].code == code, name


def test_canonical_hit_rate_is_summed_in_the_stats_query(session):
    from gateway.db import stats_queries

    rows = {row["tenant"]: row for row in stats_queries.all_tenant_stats(session, None, None)}
    assert rows["globex"]["canonical_hit_rate"] == pytest.approx(29 * 960 / (30 * 1200))
    assert rows["initech"]["attainable_hit_rate"] == pytest.approx(29 * 512 / (30 * 800))


def test_series_by_template_adds_up_to_the_tenant_totals(session):
    acme = insight_queries.find_tenant(session, "acme").id
    rows = insight_queries.hit_rate_series_by(session, "template", acme, None, None, "hour")
    assert {row["template"] for row in rows} == {"agent", "rag"}
    assert sum(row["requests"] for row in rows) == 41
    assert sum(row["cached_tokens"] for row in rows) == 39 * 800
    assert [row["bucket_start"] for row in rows] == sorted(row["bucket_start"] for row in rows)


def test_system_sightings_find_the_other_tenant(session):
    umbrella = insight_queries.find_tenant(session, "umbrella").id
    sightings = insight_queries.find_system_sightings(session, umbrella, {("sysA", "toolsA"), ("sysG", None)})
    assert [s.tenant_name for s in sightings[("sysA", "toolsA")]] == ["acme"]
    assert ("sysG", None) not in sightings  # globex sends raw order: no canonical prefix to share


def test_pins_and_engine_snapshots_are_listed(session):
    acme = insight_queries.find_tenant(session, "acme").id
    assert [p.hits for p in insight_queries.list_pins(session, acme, is_active_only=True)] == [39]
    snapshots = insight_queries.list_engine_snapshots(session, None, None)
    assert [s.num_evictions for s in snapshots] == [3 * i for i in range(12)]
