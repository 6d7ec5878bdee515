"""Tenant: hit rate over time by template, TTFT percentiles, top cache-breaking causes, pins."""

import pandas as pd
import streamlit as st

from dashboard import charts, controls, loaders

st.title("Tenant")
url = controls.require_database()
window = controls.pick_window()
tenant = controls.pick_tenant(url)
if tenant is None:
    st.stop()
tenant_id = int(tenant["tenant_id"])
st.caption(f"Tenant **{tenant.name}** · cache group: {tenant['cache_group'] or 'none (own namespace)'}")

stats = loaders.load_tenant_stats(url, tenant_id, window.since, window.until)
if stats["requests"] == 0:
    st.info(f"No requests from {tenant.name} in this time range.", icon=":material/hourglass_empty:")
    st.stop()

columns = st.columns(5)
columns[0].metric("Requests", f"{stats['requests']:,}")
columns[1].metric("Hit rate", controls.percent(stats["hit_rate"]))
columns[2].metric("Raw-order hit rate", controls.percent(stats["raw_hit_rate"]))
columns[3].metric("TTFT p50", "n/a" if stats["ttft_p50_ms"] is None else f"{stats['ttft_p50_ms']:.0f} ms")
columns[4].metric("TTFT p95", "n/a" if stats["ttft_p95_ms"] is None else f"{stats['ttft_p95_ms']:.0f} ms")
host_rate = stats.get("host_hit_rate") or 0.0
st.caption(f"Hit rate by tier: device cache {controls.percent((stats['hit_rate'] or 0.0) - host_rate)} · "
           f"host KV tier {controls.percent(host_rate)} ({stats.get('host_cached_tokens', 0):,} tokens copied back)")

st.subheader("Hit rate over time, by template")
series = loaders.load_series(url, "template", tenant_id, window.since, window.until, window.bucket)
st.altair_chart(charts.hit_rate_timeseries(series, color="template"), width="stretch")

st.subheader("Top cache-breaking causes")
diagnosis = loaders.load_diagnosis(url, tenant_id, window.since, window.until, controls.scope() is None)
causes = pd.DataFrame(diagnosis["causes"])
if causes.empty:
    st.success("No lost prefix hits in this range: every reusable prefix was served from cache.")
else:
    st.altair_chart(charts.lost_tokens_by_cause(causes.head(5)), width="stretch")
    st.caption("Details and fixes: see the Cache doctor page.")
by_section = pd.DataFrame(stats["lost_tokens_by_cause"])
if not by_section.empty:
    with st.expander("Why missed requests missed, request by request (cache diagnosis)"):
        st.caption("Each request's reason against its caller's previous request, as its "
                   "x-radixgate-cache-diagnosis header said; the causes above sum the same reasons over the window.")
        st.dataframe(by_section, hide_index=True, width="stretch")

st.subheader("Pins")
pins = loaders.load_pins(url, tenant_id)
if pins.empty:
    st.info("No pins. Pin a hot static prefix with `POST /v1/pins` so it is never evicted.", icon=":material/push_pin:")
else:
    active = pins[pins["deleted_at"].isna()]
    st.caption(f"{len(active)} active pins, {int(active['num_tokens'].sum()):,} pinned tokens, "
               f"{int(pins['hits'].sum()):,} hits in total.")
    st.altair_chart(charts.pin_hits(pins), width="stretch")
    st.dataframe(pins, hide_index=True, width="stretch")
