"""Templates (the studio): versions and labels, an editor with a sample body, live preview with lint,
diff against the published version, the what-if estimate, publish, and pin-and-warm.

A tenant's page is a client of the gateway's API (dashboard/client.py) with the signed-in key;
an operator sees each tenant's versions and labels read-only (authoring needs the tenant's key).
"""

import streamlit as st

from dashboard import auth, charts, controls, loaders, studio
from dashboard import settings as dashboard_settings
from dashboard.client import GatewayClient, GatewayError

NEW = "(new template)"

st.title("Templates")
url = controls.require_database()
viewer = auth.require_viewer()
if viewer.is_operator:
    tenant = controls.pick_tenant(url)
    if tenant is None:
        st.stop()
    versions = loaders.load_template_versions(url, int(tenant["tenant_id"]))
    if versions.empty:
        st.info(f"{tenant.name} has no templates of its own yet.", icon=":material/edit_note:")
    else:
        st.dataframe(versions, hide_index=True, width="stretch")
    st.caption("Authoring happens in the tenant's own sign-in: every change goes through the API with its key.")
    st.stop()

gateway_url = dashboard_settings.current().gateway_url
if not gateway_url:
    st.info("The studio talks to the gateway's API: set RADIXGATE_GATEWAY_URL (`radixgate serve --with-dashboard` "
            "does).", icon=":material/link_off:")
    st.stop()
client = GatewayClient(gateway_url, viewer.key)
try:
    names = [t["name"] for t in client.list_templates()]
    choice = st.sidebar.selectbox("Template", names + [NEW], key="studio_template")
    name = st.sidebar.text_input("New template name", key="studio_new_name") if choice == NEW else choice
    if not name:
        st.info("Pick a template, or name a new one in the sidebar.", icon=":material/edit_note:")
        st.stop()
    current = client.get_template(name) if name in names else None
    published = client.get_template(name, str(current["published_version"])) if current else client.get_template("chat")
    samples = client.samples(name) if current else []
except GatewayError as exc:
    st.error(str(exc))
    st.stop()

if current:
    labels_of = {}
    for label, version in current["labels"].items():
        labels_of.setdefault(version, []).append(label)
    st.caption(f"**{name}** · published: v{current['published_version']} · versions: "
               + ", ".join(f"v{v}" + (f" ({', '.join(labels_of[v])})" if v in labels_of else "") for v in current["versions"]))
    with st.expander("Move a label (rollback = move it back)"):
        with st.form("move_label", border=False):
            columns = st.columns(3)
            label = columns[0].text_input("Label", value="production", key="move_label_name")
            version = columns[1].selectbox("Version", current["versions"][::-1], key="move_label_version")
            if columns[2].form_submit_button("Move label"):
                try:
                    client.move_label(name, label, int(version))
                    st.success(f"{name}@{label} now serves v{version}.")
                except GatewayError as exc:
                    st.error(str(exc))
else:
    st.caption(f"New template **{name}**: the editor starts from the built-in `chat` template.")

left, right = st.columns(2)
draft = left.text_area("Template source (draft)", value=published["source"], height=320, key=f"draft::{name}")
sample_text = right.text_area("Sample request body (JSON)", value=studio.sample_text(samples), height=320,
                              key=f"sample::{name}")
right.caption(f"Prefilled from the newest of {len(samples)} sampled requests." if samples
              else "No sampled requests yet: a made-up body. Requests naming the template are sampled.")
try:
    body = studio.parse_body(sample_text)
    preview = client.preview(body, draft)
except (ValueError, GatewayError) as exc:
    st.error(f"Preview failed: {exc}")
    st.stop()

st.subheader("Preview")
columns = st.columns(3)
columns[0].metric("Prompt tokens", f"{preview['num_tokens']:,}")
columns[1].metric("Cacheable static prefix", f"{preview['static_prefix_len']:,} tokens")
columns[2].metric("Static prefix pages", f"{preview['static_prefix_pages']:,}")
lint = preview["lint"]
if lint:
    st.warning(f"{len(lint)} lint finding(s): " + "; ".join(f"line {f['line']}: {f['rule']}" for f in lint))
else:
    st.success("No lint findings: nothing in the draft breaks the cached prefix.")
shaded, lines = st.columns(2)
shaded.markdown(studio.shaded_prompt(preview), unsafe_allow_html=True)
lines.dataframe(studio.lint_table(draft, lint), hide_index=True, width="stretch")

if current:
    with st.expander(f"Diff against the published version (v{current['published_version']})"):
        st.code(client.diff(name, draft)["diff"] or "(no changes)", language="diff")

st.subheader("What-if: the recent sampled requests, replayed")
estimate = client.estimate(name, draft)
if estimate["num_requests"] == 0:
    st.info("No sampled requests for this template yet: send requests naming it and the what-if replays them.",
            icon=":material/hourglass_empty:")
else:
    columns = st.columns(2)
    draft_rate, base = estimate["draft"]["hit_rate"], estimate["current"]
    columns[0].metric("What-if hit rate · draft", controls.percent(draft_rate),
                      delta=None if base is None else f"{(draft_rate - base['hit_rate']) * 100:+.1f} points")
    if base is not None:
        columns[1].metric(f"What-if hit rate · current v{base['template_version']}", controls.percent(base["hit_rate"]))
    st.altair_chart(charts.what_if_prefill(studio.what_if_frame(estimate)), width="stretch")
    st.caption(f"{estimate['num_requests']} requests, token-level oracle (no model run): prefilled tokens per request.")

st.subheader("Publish")
with st.form("publish", border=False):
    columns = st.columns([2, 1])
    label = columns[0].text_input("Move this label to the new version (empty: none)", value="production",
                                  key="publish_label")
    if columns[1].form_submit_button("Publish"):
        try:
            saved = client.publish(name, draft, label.strip() or None)
            loaders.clear_caches()
            st.success(f"Published {name} v{saved['version']}" + (f"; {name}@{label} serves it." if label else "."))
        except GatewayError as exc:
            st.error(str(exc))
if current and st.button("Pin and warm the published static prefix", icon=":material/push_pin:"):
    try:
        pin = client.pin(studio.pin_body(body, f"{name}@{current['published_version']}"))
        st.success(f"Pinned {pin['num_tokens']:,} tokens (pin {pin['id']}).")
    except GatewayError as exc:
        st.error(str(exc))
