"""radixgate dashboard: `streamlit run dashboard/app.py` (or `radixgate dashboard`).

Reads the gateway's database at RADIXGATE_DB_URL (default sqlite:///./radixgate.db), read-only;
the Engine page also reads live gauges from RADIXGATE_GATEWAY_URL when it is set.
"""

from pathlib import Path

import streamlit as st

from dashboard import controls

PAGES = Path(__file__).resolve().parent / "pages"

st.set_page_config(page_title="radixgate", page_icon=":material/account_tree:", layout="wide")
navigation = st.navigation(
    [
        st.Page(PAGES / "overview.py", title="Overview", icon=":material/monitoring:", default=True),
        st.Page(PAGES / "tenant.py", title="Tenant", icon=":material/person:"),
        st.Page(PAGES / "engine.py", title="Engine", icon=":material/memory:"),
        st.Page(PAGES / "doctor.py", title="Cache doctor", icon=":material/stethoscope:"),
    ]
)
st.sidebar.caption("radixgate · prefix-cache hit rates")
controls.refresh_button()
navigation.run()
