"""Cache doctor: a tenant's lost prefix hits, ranked by cause, each with a fix and what it is worth."""

import pandas as pd
import streamlit as st

from dashboard import charts, controls, loaders



def speedup_text(speedup: dict, hit_rate: float) -> str:
    factor = "unbounded" if speedup["speedup"] is None else f"{speedup['speedup']:.2f}x"
    ttft = "" if speedup["ttft_speedup"] is None else f" ({speedup['ttft_speedup']:.2f}x in the tenant's own TTFTs)"
    return (
        f"prefill work **{speedup['uncached_tokens_before']:,}** → **{speedup['uncached_tokens_after']:,}** uncached "
        f"tokens: **{factor}** prefill speedup{ttft}, hit rate {controls.percent(hit_rate)} → "
        f"**{controls.percent(speedup['hit_rate_after'])}**."
    )


st.title("Cache doctor")
url = controls.require_database()
window = controls.pick_window()
tenant = controls.pick_tenant(url)
if tenant is None:
    st.stop()

is_operator = controls.scope() is None
diagnosis = loaders.load_diagnosis(url, int(tenant["tenant_id"]), window.since, window.until, is_operator)
if diagnosis["num_requests"] == 0:
    st.info(f"No requests from {tenant.name} in this time range: nothing to diagnose.", icon=":material/hourglass_empty:")
    st.stop()

columns = st.columns(4)
columns[0].metric("Hit rate", controls.percent(diagnosis["hit_rate"]))
columns[1].metric("Attainable (canonical) hit rate", controls.percent(diagnosis["canonical_hit_rate"]))
columns[2].metric("Raw-order hit rate", controls.percent(diagnosis["raw_hit_rate"]))
columns[3].metric("Lost prefix tokens", f"{diagnosis['lost_tokens']:,}")

speedup = diagnosis["speedup"]
causes = pd.DataFrame(diagnosis["causes"])
if causes.empty:
    st.success(f"{tenant.name} loses no reusable prefix tokens in this range. Nothing to fix.")
    st.stop()

top = diagnosis["causes"][0]
st.subheader(f"Fix first: {top['title']}")
st.markdown(speedup_text(speedup, diagnosis["hit_rate"]) + f" Counterfactual: {top['counterfactual']}.")
canonicalize = diagnosis["canonicalize_speedup"]
if canonicalize is not None and top["code"] != "canonicalize":
    st.markdown("Turning canonicalization on (every ordering cause at once): " + speedup_text(canonicalize, diagnosis["hit_rate"]))
st.caption(f"Models: {speedup['model']}; {speedup['ttft_model']}.")
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
