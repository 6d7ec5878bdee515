"""Engine: cached / pinned / evictable tokens and evictions, from stored snapshots or live /metrics."""

import pandas as pd
import streamlit as st

from dashboard import charts, controls, queries

st.title("Engine cache")
url = controls.require_database()
window = controls.pick_window()

live_url = queries.gateway_url()
live = queries.load_live_engine_stats(live_url) if live_url else None
if live_url and live is None:
    st.warning(f"The gateway at {live_url} did not answer on /metrics; showing stored snapshots only.")
if live:
    st.subheader("Live (gateway /metrics)")
    columns = st.columns(4)
    for column, name in zip(columns, queries.ENGINE_GAUGES):
        column.metric(name.replace("_", " ").capitalize(), f"{int(live.get(name, 0)):,}")
    samples = st.session_state.setdefault("live_engine_samples", [])
    samples.append({"created_at": pd.Timestamp.now(tz="UTC"), **live})

snapshots = queries.load_engine_snapshots(url, window.since, window.until)
if snapshots.empty and not live:
    st.info(
        "No engine statistics yet. Set RADIXGATE_GATEWAY_URL to a running gateway for live figures; "
        "stored snapshots appear here once the gateway records them.",
        icon=":material/memory:",
    )
    st.stop()

if not snapshots.empty:
    latest = snapshots.iloc[-1]
    st.subheader(f"Latest snapshot · {latest['created_at']:%Y-%m-%d %H:%M} UTC")
    columns = st.columns(4)
    columns[0].metric("Cached tokens", f"{int(latest['cached_tokens']):,}")
    columns[1].metric("Pinned tokens", f"{int(latest['pinned_tokens']):,}")
    columns[2].metric("Evictable tokens", f"{int(latest['evictable_tokens']):,}")
    columns[3].metric("Evictions (total)", f"{int(latest['num_evictions']):,}")
    st.subheader("Cache contents over time")
    st.altair_chart(charts.engine_tokens(snapshots), width="stretch")
    st.subheader("Evictions over time")
    st.altair_chart(charts.evictions_over_time(snapshots), width="stretch")
elif len(st.session_state.get("live_engine_samples", [])) > 1:
    live_series = pd.DataFrame(st.session_state["live_engine_samples"]).rename(columns={"evictions": "num_evictions"})
    st.subheader("Live samples this session (refresh to add one)")
    st.altair_chart(charts.engine_tokens(live_series), width="stretch")
    st.altair_chart(charts.evictions_over_time(live_series), width="stretch")
