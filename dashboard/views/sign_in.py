"""Sign in: a password field (Enter signs in); an admin key shows every tenant, a tenant key its own data."""

import streamlit as st

from dashboard import auth, controls

st.title("Sign in to radixgate")
url = controls.require_database()
st.caption("Paste an API key: the admin key shows every tenant (operator view); a tenant key shows that tenant only.")
with st.form("sign_in", border=False):
    key = st.text_input("API key", type="password", key="sign_in_key", placeholder="sk-...")
    submitted = st.form_submit_button("Sign in")
if submitted:
    viewer = auth.check_key(url, key)
    if viewer is None:
        st.error("That key is not a live admin or tenant key.", icon=":material/key_off:")
    else:
        auth.sign_in(viewer)
        st.rerun()
