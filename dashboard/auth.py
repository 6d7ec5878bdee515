"""Sign-in: who is looking at the dashboard, from the key they typed.

A key is checked exactly as the gateway checks a bearer key (gateway.tenants: sha256 of the
key against the stored, unrevoked hashes; read-only): a live admin key signs an operator in
(every tenant), a tenant key signs that tenant in (its own data only). The Viewer lives in
st.session_state for the browser session, so every page and rerun sees it; sign-out drops it.
The key itself is kept there too: it is the bearer key the Templates page sends the gateway.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from dashboard import loaders
from gateway.tenants import admin_keys
from gateway.tenants import service as tenant_keys

SESSION_KEY = "viewer"


@dataclass(frozen=True)
class Viewer:
    """Signed in: an operator (tenant_id None, every tenant) or one tenant."""

    key: str
    tenant_id: int | None = None
    tenant_name: str | None = None

    @property
    def is_operator(self) -> bool:
        return self.tenant_id is None

    @property
    def label(self) -> str:
        return "operator (all tenants)" if self.is_operator else f"tenant {self.tenant_name}"


def check_key(url: str, key: str) -> Viewer | None:
    """The Viewer `key` signs in, or None when it is no live admin or tenant key."""
    key = key.strip()
    if not key:
        return None
    with loaders.session_factory(url)() as session:
        if admin_keys.is_admin_key(session, key):
            return Viewer(key=key)
        found = tenant_keys.find_key(session, key)
        if found is None:
            return None
        tenant, _ = found
        return Viewer(key=key, tenant_id=tenant.id, tenant_name=tenant.name)


def current() -> Viewer | None:
    return st.session_state.get(SESSION_KEY)


def require_viewer() -> Viewer:
    """The signed-in viewer; a page run without one stops (app.py shows only the sign-in page then)."""
    viewer = current()
    if viewer is None:
        st.info("Sign in with an API key to see this page.", icon=":material/lock:")
        st.stop()
    return viewer


def sign_in(viewer: Viewer) -> None:
    st.session_state[SESSION_KEY] = viewer


def sign_out() -> None:
    for name in list(st.session_state):
        del st.session_state[name]
    loaders.clear_caches()
