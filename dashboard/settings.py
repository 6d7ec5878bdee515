"""DashboardSettings: the dashboard's whole configuration, from RADIXGATE_* environment variables.

    RADIXGATE_DB_URL        the gateway's database, read-only (default sqlite:///./radixgate.db)
    RADIXGATE_GATEWAY_URL   the gateway's base URL: live engine gauges and every write (unset: none)

app.py builds one per browser session on its first run (`install`) and keeps it in
st.session_state; pages and controls read that one (`current`), never the environment. Sign-out
clears the session state, so the next run reads the environment again.
Other RADIXGATE_* variables (the gateway's own) are ignored.
"""

from __future__ import annotations

import streamlit as st
from pydantic import field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from gateway.db.session import DEFAULT_DB_URL

SESSION_KEY = "dashboard_settings"


class DashboardSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RADIXGATE_", extra="ignore", frozen=True)

    db_url: str = DEFAULT_DB_URL
    gateway_url: str | None = None

    @field_validator("gateway_url")
    @classmethod
    def _blank_means_none(cls, value: str | None) -> str | None:
        return value or None


def install() -> DashboardSettings:
    """The session's settings, built from the environment on its first run (app.py calls this first)."""
    if SESSION_KEY not in st.session_state:
        st.session_state[SESSION_KEY] = DashboardSettings()
    return st.session_state[SESSION_KEY]


def current() -> DashboardSettings:
    """The settings app.py installed for this session (a page script run on its own installs them)."""
    return install()
