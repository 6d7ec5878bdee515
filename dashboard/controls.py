"""Sidebar controls shared by the pages: database check, time window, tenant picker, refresh.

The tenant picker is the scoping point: a signed-in tenant gets its own row and no picker, so
no page names another tenant; an operator picks among all of them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pandas as pd
import streamlit as st

from dashboard import auth, loaders
from dashboard import settings as dashboard_settings

WINDOWS = {
    "Last hour": timedelta(hours=1),
    "Last 24 hours": timedelta(days=1),
    "Last 7 days": timedelta(days=7),
    "Last 30 days": timedelta(days=30),
    "All time": None,
}
DEFAULT_WINDOW = "Last 7 days"


@dataclass(frozen=True)
class Window:
    """A half-open time window [since, until); `bucket` is the series granularity that suits it."""

    since: datetime | None
    until: datetime
    bucket: str


def require_database() -> str:
    """The DB URL, or an explanatory empty state and a stop when it cannot be read."""
    url = dashboard_settings.current().db_url
    problem = loaders.database_problem(url)
    if problem:
        st.info(problem, icon=":material/database:")
        st.stop()
    return url


def pick_window() -> Window:
    """Sidebar range picker. `until` is rounded up to the minute so cached loaders get stable keys."""
    label = st.sidebar.selectbox("Time range", list(WINDOWS), index=list(WINDOWS).index(DEFAULT_WINDOW), key="window")
    now = datetime.now(timezone.utc).replace(second=0, microsecond=0) + timedelta(minutes=1)
    span = WINDOWS[label]
    bucket = "hour" if span is not None and span <= timedelta(days=7) else "day"
    return Window(since=None if span is None else now - span, until=now, bucket=bucket)


def scope() -> int | None:
    """The tenant id every loader is limited to: the signed-in tenant's, or None for an operator."""
    return auth.require_viewer().tenant_id


def pick_tenant(url: str) -> pd.Series | None:
    """Sidebar tenant picker (operators); a tenant's own row (tenants); an empty state and None
    when there are no tenants."""
    tenant_id = scope()
    tenants = loaders.load_tenants(url, tenant_id)
    if tenant_id is not None and not tenants.empty:
        return tenants.iloc[0].rename(tenants.iloc[0]["tenant"])
    if tenants.empty:
        st.info("No tenants yet. Create one with `radixgate tenant create NAME`.", icon=":material/group:")
        return None
    name = st.sidebar.selectbox("Tenant", tenants["tenant"].tolist(), key="tenant")
    return tenants.set_index("tenant").loc[name].rename(name)


def refresh_button() -> None:
    """Sidebar refresh: drop every cached query result and rerun."""
    if st.sidebar.button("Refresh data", icon=":material/refresh:"):
        loaders.clear_caches()
        st.rerun()


def percent(value: float | None) -> str:
    return "n/a" if value is None or pd.isna(value) else f"{value:.1%}"
