"""radixgate dashboard: `streamlit run dashboard/app.py` (or `radixgate dashboard`).

Reads the gateway's database at RADIXGATE_DB_URL (default sqlite:///./radixgate.db), read-only;
the Engine page also reads live gauges from RADIXGATE_GATEWAY_URL when it is set.

The page scripts live in views/, not pages/: Streamlit treats a `pages/` folder beside
the main script as a legacy multipage app, and a first visit to a page's URL (e.g. a
bookmarked /doctor) then runs that page alone, without this navigation and sidebar.
"""

from pathlib import Path

import streamlit as st

from dashboard import controls

VIEWS = Path(__file__).resolve().parent / "views"

st.set_page_config(page_title="radixgate", page_icon=":material/account_tree:", layout="wide")
navigation = st.navigation(
    [
        st.Page(VIEWS / "overview.py", title="Overview", icon=":material/monitoring:", default=True),
        st.Page(VIEWS / "tenant.py", title="Tenant", icon=":material/person:"),
        st.Page(VIEWS / "engine.py", title="Engine", icon=":material/memory:"),
        st.Page(VIEWS / "doctor.py", title="Cache doctor", icon=":material/stethoscope:"),
    ]
)
st.sidebar.caption("radixgate · prefix-cache hit rates")
controls.refresh_button()
navigation.run()
