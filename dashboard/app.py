"""radixgate dashboard: `streamlit run dashboard/app.py` (or `radixgate dashboard`).

Every page is behind a sign-in (auth.py): without a key only the sign-in page exists; the
admin key gets every page over every tenant; a tenant key gets its own Overview, Tenant,
Cache doctor and Templates pages (the Engine page, shared by all tenants, is the operator's).
Reads come from the gateway's database at RADIXGATE_DB_URL (default sqlite:///./radixgate.db),
read-only and scoped to the signed-in tenant; every change (the Templates page) goes through
the gateway's HTTP API at RADIXGATE_GATEWAY_URL with the signed-in key. Both are read once per
session into settings.DashboardSettings.

The page scripts live in views/, not pages/: Streamlit treats a `pages/` folder beside
the main script as a legacy multipage app, and a first visit to a page's URL (e.g. a
bookmarked /doctor) then runs that page alone, without this navigation and sidebar.
"""

from pathlib import Path

import streamlit as st

from dashboard import auth, controls
from dashboard import settings as dashboard_settings

VIEWS = Path(__file__).resolve().parent / "views"


def pages(viewer: auth.Viewer | None) -> list:
    if viewer is None:
        return [st.Page(VIEWS / "sign_in.py", title="Sign in", icon=":material/login:", default=True)]
    shown = [
        st.Page(VIEWS / "overview.py", title="Overview", icon=":material/monitoring:", default=True),
        st.Page(VIEWS / "tenant.py", title="Tenant", icon=":material/person:"),
        st.Page(VIEWS / "doctor.py", title="Cache doctor", icon=":material/stethoscope:"),
        st.Page(VIEWS / "templates.py", title="Templates", icon=":material/edit_note:"),
    ]
    if viewer.is_operator:
        shown.insert(2, st.Page(VIEWS / "engine.py", title="Engine", icon=":material/memory:"))
    return shown


st.set_page_config(page_title="radixgate", page_icon=":material/account_tree:", layout="wide", menu_items={})
dashboard_settings.install()  # the pages read it through dashboard_settings.current()
viewer = auth.current()
navigation = st.navigation(pages(viewer))
st.sidebar.caption("radixgate · prefix-cache hit rates")
if viewer is not None:
    st.sidebar.caption(f"Signed in as **{viewer.label}**")
    if st.sidebar.button("Sign out", icon=":material/logout:"):
        auth.sign_out()
        st.rerun()
    controls.refresh_button()
navigation.run()
