"""Cache doctor: a tenant's lost prefix hits, ranked by cause, each with a fix and what it is worth."""

import pandas as pd
import streamlit as st

from dashboard import charts, controls, loaders

st.title("Cache doctor")
url = controls.require_database()
window = controls.pick_window()
tenant = controls.pick_tenant(url)
if tenant is None:
    st.stop()

diagnosis = loaders.load_diagnosis(url, int(tenant["tenant_id"]), window.since, window.until)
if diagnosis["num_requests"] == 0:
    st.info(f"No requests from {tenant.name} in this time range: nothing to diagnose.", icon=":material/hourglass_empty:")
    st.stop()

columns = st.columns(4)
columns[0].metric("Hit rate", controls.percent(diagnosis["hit_rate"]))
columns[1].metric("Attainable hit rate", controls.percent(diagnosis["attainable_hit_rate"]))
columns[2].metric("Raw-order hit rate", controls.percent(diagnosis["raw_hit_rate"]))
columns[3].metric("Lost prefix tokens", f"{diagnosis['lost_tokens']:,}")

speedup = diagnosis["speedup"]
causes = pd.DataFrame(diagnosis["causes"])
if causes.empty:
    st.success(f"{tenant.name} loses no reusable prefix tokens in this range. Nothing to fix.")
    st.stop()

top = diagnosis["causes"][0]
factor = "unbounded" if speedup["speedup"] is None else f"{speedup['speedup']:.2f}x"
st.subheader(f"Fix first: {top['title']}")
st.markdown(
    f"Fixing it would cut prefill work from **{speedup['uncached_tokens_before']:,}** to "
    f"**{speedup['uncached_tokens_after']:,}** uncached tokens: an estimated **{factor}** prefill speedup, "
    f"hit rate {controls.percent(diagnosis['hit_rate'])} → **{controls.percent(speedup['hit_rate_after'])}**. "
    f"Prompts: p50 {speedup['prompt_tokens_p50']:,} tokens, p95 {speedup['prompt_tokens_p95']:,}."
)
st.caption(f"Model: {speedup['model']}.")
recovered = diagnosis["cached_tokens"] - diagnosis["raw_cached_tokens"]
if recovered > 0:
    st.caption(f"Canonicalization already recovers {recovered:,} prompt tokens that the clients' raw order "
               f"would have missed (raw-order hit rate {controls.percent(diagnosis['raw_hit_rate'])}).")

st.subheader("Causes of lost hits, ranked")
st.altair_chart(charts.lost_tokens_by_cause(causes), width="stretch")
for rank, cause in enumerate(diagnosis["causes"], start=1):
    label = f"{rank}. {cause['title']} · {cause['share']:.0%} of lost tokens ({cause['lost_tokens']:,})"
    with st.expander(label, expanded=rank == 1):
        st.markdown(f"**Evidence:** {cause['detail']} ({cause['num_requests']:,} requests).")
        st.markdown(f"**Fix:** {cause['fix']}")
if diagnosis["is_prefix_estimate_assumed"]:
    st.warning("No request of this tenant ever hit, so static-prefix lengths are assumed (75% of the prompt).")
