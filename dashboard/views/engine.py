"""Engine: cached / pinned / evictable tokens and evictions, from stored snapshots and live /metrics."""

import pandas as pd
import streamlit as st

from dashboard import charts, controls, loaders
from dashboard import settings as dashboard_settings

LIVE_REFRESH_S = 5
MAX_LIVE_SAMPLES = 720  # one hour at LIVE_REFRESH_S


@st.fragment(run_every=LIVE_REFRESH_S)
def show_live_gauges(gateway_url: str) -> None:
    """Poll the gateway's /metrics every LIVE_REFRESH_S seconds; chart the samples of this session."""
    live = loaders.load_live_engine_stats(gateway_url)
    if live is None:
        st.warning(f"The gateway at {gateway_url} did not answer on /metrics; showing stored snapshots only.")
        return
    st.subheader("Live (gateway /metrics)")
    columns = st.columns(4)
    for column, name in zip(columns, loaders.ENGINE_GAUGES):
        column.metric(name.replace("_", " ").capitalize(), f"{int(live.get(name, 0)):,}")
    samples = st.session_state.setdefault("live_engine_samples", [])
    samples.append({"created_at": pd.Timestamp.now(tz="UTC"), **live})
    del samples[:-MAX_LIVE_SAMPLES]
    if len(samples) > 1:
        frame = pd.DataFrame(samples).rename(columns={"evictions": "num_evictions"}).fillna(0)
        st.altair_chart(charts.engine_tokens(frame, time_format="%H:%M:%S"), width="stretch")
        st.altair_chart(charts.evictions_over_time(frame, time_format="%H:%M:%S"), width="stretch")
    else:
        st.caption(f"Sampling every {LIVE_REFRESH_S} s; the live charts appear after the next sample.")


st.title("Engine cache")
url = controls.require_database()
if controls.scope() is not None:  # the engine's cache is shared by every tenant: the operator's page
    st.info("The Engine page is the operator's: sign in with the admin key.", icon=":material/lock:")
    st.stop()
window = controls.pick_window()
live_url = dashboard_settings.current().gateway_url
if live_url:
    show_live_gauges(live_url)

snapshots = loaders.load_engine_snapshots(url, window.since, window.until)
if snapshots.empty and live_url:
    st.caption("No stored engine snapshots in this range; the figures above are live.")
    st.stop()
if snapshots.empty:
    st.info(
        "No stored engine snapshots in this range. Set RADIXGATE_GATEWAY_URL to a running gateway "
        "(`radixgate serve --with-dashboard` does) for live cache figures.",
        icon=":material/memory:",
    )
    st.stop()

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
