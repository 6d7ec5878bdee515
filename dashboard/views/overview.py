"""Overview: per tenant, actual vs raw-order vs attainable hit rate, savings, and hit rate over time.
A signed-in tenant sees only its own row (controls.scope)."""

import streamlit as st

from dashboard import charts, controls, loaders

st.title("Prefix-cache overview")
url = controls.require_database()
tenant_id = controls.scope()
window = controls.pick_window()
overview = loaders.load_overview(url, window.since, window.until, tenant_id)

if overview.empty:
    st.info(
        "No requests in this time range yet. Send chat requests through the gateway "
        "(or widen the time range) and they will show up here.",
        icon=":material/hourglass_empty:",
    )
    st.stop()

prompt_tokens = int(overview["prompt_tokens"].sum())
cached_tokens = int(overview["cached_tokens"].sum())
columns = st.columns(4)
columns[0].metric("Requests", f"{int(overview['requests'].sum()):,}")
columns[1].metric("Hit rate (token-weighted)", controls.percent(cached_tokens / prompt_tokens if prompt_tokens else None))
columns[2].metric("Prompt tokens saved", f"{cached_tokens:,}")
columns[3].metric("Est. prefill time saved", f"{overview['prefill_s_saved'].sum():,.1f} s")
best = overview.sort_values("hit_rate", ascending=False).iloc[0]
st.caption(
    f"{len(overview)} tenants with traffic: {', '.join(overview['tenant'])}. "
    f"Highest hit rate: **{best['tenant']}** ({controls.percent(best['hit_rate'])})."
)

st.subheader("Hit rate per tenant")
st.altair_chart(charts.hit_rate_comparison(overview), width="stretch")
with st.expander("What do these rates mean?"):
    st.markdown(
        "- **Actual**: cached prompt tokens / prompt tokens, as served.\n"
        "- **Raw order (shadow)**: what the client's own, un-canonicalized prompt order would have hit "
        "(a token-only shadow radix index per tenant).\n"
        "- **Attainable**: tokens of requests whose static prefix (system + tools + context) was already "
        "seen earlier in this window, as if every request were canonical and the cache unbounded. "
        "The gap to *Actual* is eviction and client layout; first sightings are not counted.\n"
        "- **Prefill time saved**: cached tokens x (total TTFT / total uncached prompt tokens) of this "
        "window's completed requests (model: prefill time ~ uncached tokens)."
    )

routing = loaders.load_routing(url, window.since, window.until)
if not routing.empty:  # only where an edge gateway routed requests to remote nodes
    st.subheader("Fleet routing: available vs routed vs delivered")
    st.altair_chart(charts.routing_comparison(routing), width="stretch")
    st.caption("Available: the canonical shadow's hit. Routed: the hit the router predicted on the node it chose "
               "(its own index of what it sent where). Delivered: the nodes' own cached tokens.")

st.subheader("Hit rate over time")
series = loaders.load_series(url, "tenant", tenant_id, window.since, window.until, window.bucket)
st.altair_chart(charts.hit_rate_timeseries(series, color="tenant"), width="stretch")

st.subheader("Per tenant")
table = overview[
    ["tenant", "requests", "prompt_tokens", "cached_tokens", "hit_rate", "raw_hit_rate",
     "attainable_hit_rate", "prefill_s_saved", "ttft_p50_ms", "ttft_p95_ms", "errors"]
]
st.dataframe(
    table,
    hide_index=True,
    width="stretch",
    column_config={
        "hit_rate": st.column_config.NumberColumn("hit rate", format="percent"),
        "raw_hit_rate": st.column_config.NumberColumn("raw-order hit rate", format="percent"),
        "attainable_hit_rate": st.column_config.NumberColumn("attainable hit rate", format="percent"),
        "prefill_s_saved": st.column_config.NumberColumn("prefill s saved", format="%.1f"),
        "ttft_p50_ms": st.column_config.NumberColumn("TTFT p50 ms", format="%.0f"),
        "ttft_p95_ms": st.column_config.NumberColumn("TTFT p95 ms", format="%.0f"),
    },
)
