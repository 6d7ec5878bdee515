"""The dashboard's only data access: cached, read-only loaders over gateway.db.

Every loader takes the database URL and a window as bound parameters, so
`st.cache_data` keys on them; `clear_caches()` is the refresh control's hook. Loaders that
span tenants take `tenant_id` (None: every tenant, the operator's view) and return only that
tenant's rows and numbers when it is set.
Loaders return pandas DataFrames (or plain dicts) and never write: the database
belongs to the gateway. A missing SQLite file is reported, never created.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import httpx
import pandas as pd
import streamlit as st
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import inspect
from sqlalchemy.engine import make_url

from gateway.db import insight_queries
from gateway.db import stats_queries
from gateway.db import template_queries
from gateway.db.ttft_percentiles import ttft_percentiles
from gateway.doctor.diagnosis import diagnose
from gateway.db.session import make_engine, make_session_factory

TTL_S = 60
REQUIRED_TABLES = {"tenants", "request_log"}
ENGINE_GAUGES = ("cached_tokens", "pinned_tokens", "evictable_tokens", "evictions")


def clear_caches() -> None:
    st.cache_data.clear()


@st.cache_resource
def session_factory(url: str):
    return make_session_factory(make_engine(url))


def database_problem(url: str) -> str | None:
    """Why `url` cannot be read yet (missing file, no schema), or None when it can."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        if not Path(parsed.database).is_file():
            return f"No database file at `{parsed.database}`. Start the gateway (`radixgate serve`) to create it."
    try:
        with session_factory(url)() as session:
            tables = set(inspect(session.get_bind()).get_table_names())
    except Exception as exc:  # an unreachable server is an empty state, not a traceback
        return f"Cannot open `{parsed.render_as_string(hide_password=True)}`: {exc.__class__.__name__}: {exc}"
    if not REQUIRED_TABLES <= tables:
        return "The database has no radixgate tables yet: run `radixgate db upgrade` or start the gateway."
    return None


@st.cache_data(ttl=TTL_S)
def load_tenants(url: str, tenant_id: int | None = None) -> pd.DataFrame:
    with session_factory(url)() as session:
        tenants = insight_queries.list_tenants(session)
        rows = [{"tenant_id": t.id, "tenant": t.name, "cache_group": t.cache_group}
                for t in tenants if tenant_id is None or t.id == tenant_id]
    return pd.DataFrame(rows, columns=["tenant_id", "tenant", "cache_group"])


@st.cache_data(ttl=TTL_S)
def load_overview(
    url: str, since: datetime | None, until: datetime | None, tenant_id: int | None = None
) -> pd.DataFrame:
    """Per tenant with traffic: totals, hit / raw-order / attainable (the measured canonical
    counterfactual, summed in the same stats query) rates, prefill time saved."""
    with session_factory(url)() as session:
        rows = [row for row in stats_queries.all_tenant_stats(session, since, until)
                if tenant_id is None or row["tenant_id"] == tenant_id]
        stats = pd.DataFrame(rows)
        ms_per_token = insight_queries.prefill_ms_per_token(session, since, until, tenant_id)
    if stats.empty:
        return stats
    stats["tenant"] = stats["tenant"].fillna(stats["tenant_id"].map(lambda tid: f"tenant {tid}"))
    stats["prefill_s_saved"] = stats["cached_tokens"] * ms_per_token / 1000
    return stats


@st.cache_data(ttl=TTL_S)
def load_routing(url: str, since: datetime | None, until: datetime | None) -> pd.DataFrame:
    """Per tenant an edge router served: available vs routed (predicted) vs delivered hit rate."""
    from gateway.db import fleet_queries

    with session_factory(url)() as session:
        return pd.DataFrame(fleet_queries.routing_by_tenant(session, since, until))


@st.cache_data(ttl=TTL_S)
def load_series(
    url: str, group: str, tenant_id: int | None, since: datetime | None, until: datetime | None, bucket: str
) -> pd.DataFrame:
    """Hit rates per time bucket and `group` ("tenant" or "template"), tenant names filled in."""
    with session_factory(url)() as session:
        frame = pd.DataFrame(insight_queries.hit_rate_series_by(session, group, tenant_id, since, until, bucket))
    if frame.empty:
        return frame
    if group == "tenant":
        names = load_tenants(url, tenant_id).set_index("tenant_id")["tenant"]
        frame["tenant"] = frame["tenant"].map(names).fillna(frame["tenant"].astype(str))
    else:
        frame["template"] = frame["template"].fillna("(none)")
    return frame


@st.cache_data(ttl=TTL_S)
def load_tenant_stats(url: str, tenant_id: int, since: datetime | None, until: datetime | None) -> dict:
    """The stats API's numbers for one tenant (series left out: see load_series)."""
    with session_factory(url)() as session:
        return {
            **stats_queries.totals(session, tenant_id, since, until),
            **ttft_percentiles(session, tenant_id, since, until),
            "lost_tokens_by_cause": stats_queries.lost_tokens_by_cause(session, tenant_id, since, until),
        }


@st.cache_data(ttl=TTL_S)
def load_diagnosis(
    url: str, tenant_id: int, since: datetime | None, until: datetime | None, names_other_tenants: bool = True
) -> dict:
    """The doctor's diagnosis; names_other_tenants=False for a tenant's own view (no partner names)."""
    with session_factory(url)() as session:
        return diagnose(session, tenant_id, since, until, names_other_tenants=names_other_tenants).to_dict()


@st.cache_data(ttl=TTL_S)
def load_template_versions(url: str, tenant_id: int) -> pd.DataFrame:
    """The tenant's template versions and their labels (the operator's read-only Templates view)."""
    with session_factory(url)() as session:
        rows = template_queries.list_template_versions(session, tenant_id)
    return pd.DataFrame(rows, columns=["template", "version", "created_at", "labels"])


@st.cache_data(ttl=TTL_S)
def load_pins(url: str, tenant_id: int) -> pd.DataFrame:
    columns = ["pin_id", "template", "num_tokens", "hits", "created_at", "expires_at", "deleted_at"]
    with session_factory(url)() as session:
        rows = [
            [p.id, p.template or "(none)", p.num_tokens, p.hits, p.created_at, p.expires_at, p.deleted_at]
            for p in insight_queries.list_pins(session, tenant_id)
        ]
    return pd.DataFrame(rows, columns=columns)


@st.cache_data(ttl=TTL_S)
def load_engine_snapshots(url: str, since: datetime | None, until: datetime | None) -> pd.DataFrame:
    columns = ["created_at", "backend", "cached_tokens", "pinned_tokens", "evictable_tokens", "num_evictions"]
    with session_factory(url)() as session:
        rows = [[getattr(s, c) for c in columns] for s in insight_queries.list_engine_snapshots(session, since, until)]
    return pd.DataFrame(rows, columns=columns)


@st.cache_data(ttl=2)
def load_live_engine_stats(base_url: str) -> dict | None:
    """The gateway's engine gauges from its /metrics endpoint; None when unreachable."""
    try:
        response = httpx.get(base_url.rstrip("/") + "/metrics", timeout=2.0)
        response.raise_for_status()
    except httpx.HTTPError:
        return None
    values = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            suffix = sample.name.removeprefix("radixgate_engine_")
            if suffix in ENGINE_GAUGES:
                values[suffix] = sample.value
    return values
