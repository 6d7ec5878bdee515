"""Chart builders: pure functions from a DataFrame to an Altair chart (no Streamlit, no database)."""

from __future__ import annotations

import altair as alt
import pandas as pd

RATE_LABELS = {
    "hit_rate": "Actual",
    "raw_hit_rate": "Raw order (shadow)",
    "attainable_hit_rate": "Attainable",
}
RATE_COLORS = ["#1f6fb4", "#a8a8a8", "#2ca02c"]  # actual, raw order, attainable (the goal)
PERCENT = alt.Axis(format="%")


def hit_rate_comparison(overview: pd.DataFrame) -> alt.Chart:
    """Per tenant: actual, raw-order and attainable hit rates side by side."""
    long = overview.melt(id_vars=["tenant"], value_vars=list(RATE_LABELS), var_name="rate", value_name="value")
    long["rate"] = long["rate"].map(RATE_LABELS)
    order = list(RATE_LABELS.values())
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("tenant:N", title=None, axis=alt.Axis(labelAngle=0)),
            xOffset=alt.XOffset("rate:N", sort=order),
            y=alt.Y("value:Q", title="Hit rate (token-weighted)", axis=PERCENT, scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("rate:N", sort=order, title=None, legend=alt.Legend(orient="top"),
                            scale=alt.Scale(domain=order, range=RATE_COLORS)),
            tooltip=["tenant", "rate", alt.Tooltip("value:Q", format=".1%")],
        )
        .properties(height=280)
    )


ROUTING_LABELS = {"available_hit_rate": "Available", "routed_hit_rate": "Routed (predicted)",
                  "delivered_hit_rate": "Delivered"}


def routing_comparison(routing: pd.DataFrame) -> alt.Chart:
    """Per tenant behind an edge router: available vs routed vs delivered hit rate."""
    long = routing.melt(id_vars=["tenant"], value_vars=list(ROUTING_LABELS), var_name="rate", value_name="value")
    long["rate"] = long["rate"].map(ROUTING_LABELS)
    order = list(ROUTING_LABELS.values())
    return (
        alt.Chart(long.dropna())
        .mark_bar()
        .encode(
            x=alt.X("tenant:N", title=None, axis=alt.Axis(labelAngle=0)),
            xOffset=alt.XOffset("rate:N", sort=order),
            y=alt.Y("value:Q", title="Hit rate (token-weighted)", axis=PERCENT, scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("rate:N", sort=order, title=None, legend=alt.Legend(orient="top")),
            tooltip=["tenant", "rate", alt.Tooltip("value:Q", format=".1%")],
        )
        .properties(height=240)
    )


def hit_rate_timeseries(series: pd.DataFrame, color: str = "tenant") -> alt.VConcatChart:
    """Hit rate per time bucket, one line per `color` value, with a brush strip below as range picker."""
    brush = alt.selection_interval(encodings=["x"])
    base = alt.Chart(series).encode(
        x=alt.X("bucket_start:T", title=None),
        color=alt.Color(f"{color}:N", legend=alt.Legend(orient="top")),
    )
    detail = (
        base.mark_line(point=True)
        .encode(
            x=alt.X("bucket_start:T", title=None, scale=alt.Scale(domain=brush)),
            y=alt.Y("hit_rate:Q", title="Hit rate", axis=PERCENT, scale=alt.Scale(domain=[0, 1])),
            tooltip=[color, alt.Tooltip("bucket_start:T", title="bucket"), alt.Tooltip("hit_rate:Q", format=".1%"),
                     "requests", "prompt_tokens", "cached_tokens"],
        )
        .properties(height=240)
    )
    picker = (
        base.mark_area(opacity=0.4)
        .encode(y=alt.Y("sum(prompt_tokens):Q", title="Prompt tokens"), color=alt.value("#8a8a8a"))
        .add_params(brush)
        .properties(height=60, title="Drag to pick a range")
    )
    return alt.vconcat(detail, picker)


def lost_tokens_by_cause(causes: pd.DataFrame) -> alt.Chart:
    """Horizontal bars of lost tokens per cause (columns: title, lost_tokens, share), largest on top."""
    return (
        alt.Chart(causes)
        .mark_bar()
        .encode(
            y=alt.Y("title:N", sort="-x", title=None, axis=alt.Axis(labelLimit=360)),
            x=alt.X("lost_tokens:Q", title="Lost prompt tokens"),
            color=alt.Color("title:N", legend=None),
            tooltip=["title", "lost_tokens", alt.Tooltip("share:Q", format=".0%")],
        )
        .properties(height=alt.Step(28))
    )


def pin_hits(pins: pd.DataFrame) -> alt.Chart:
    """Hits per pin (columns: pin_id, template, num_tokens, hits)."""
    frame = pins.assign(label=pins["pin_id"].map(lambda pid: f"pin {pid}"))
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            y=alt.Y("label:N", title=None, sort="-x"),
            x=alt.X("hits:Q", title="Hits"),
            tooltip=["pin_id", "template", "num_tokens", "hits"],
        )
        .properties(height=alt.Step(24))
    )


def engine_tokens(snapshots: pd.DataFrame, time_format: str | None = None) -> alt.Chart:
    """Cached, pinned and evictable tokens over time (one line each); `time_format` for the x axis."""
    long = snapshots.melt(
        id_vars=["created_at"], value_vars=["cached_tokens", "pinned_tokens", "evictable_tokens"],
        var_name="kind", value_name="tokens",
    )
    return (
        alt.Chart(long)
        .mark_line(point=True)
        .encode(
            x=alt.X("created_at:T", title=None, axis=alt.Axis(format=time_format) if time_format else alt.Undefined),
            y=alt.Y("tokens:Q", title="Tokens"),
            color=alt.Color("kind:N", title=None, legend=alt.Legend(orient="top")),
            tooltip=["kind", "tokens", alt.Tooltip("created_at:T")],
        )
        .properties(height=240)
    )


def evictions_over_time(snapshots: pd.DataFrame, time_format: str | None = None) -> alt.Chart:
    """Evictions per interval between snapshots (the snapshot counter is cumulative; resets clip to 0)."""
    frame = snapshots.sort_values("created_at").assign(
        evictions=lambda f: f["num_evictions"].diff().fillna(0).clip(lower=0)
    )
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("created_at:T", title=None, axis=alt.Axis(format=time_format) if time_format else alt.Undefined),
            y=alt.Y("evictions:Q", title="Evictions per interval"),
            tooltip=[alt.Tooltip("created_at:T"), "evictions", "num_evictions"],
        )
        .properties(height=160)
    )


def what_if_prefill(frame: pd.DataFrame) -> alt.Chart:
    """Prefilled (uncached) prompt tokens per replayed request, one line per template variant."""
    return (
        alt.Chart(frame)
        .mark_line(point=True)
        .encode(
            x=alt.X("request:Q", title="Sampled request (oldest first)", axis=alt.Axis(tickMinStep=1)),
            y=alt.Y("prefilled_tokens:Q", title="Tokens prefilled"),
            color=alt.Color("variant:N", title=None, legend=alt.Legend(orient="top")),
            tooltip=["variant", "request", "prefilled_tokens"],
        )
        .properties(height=240)
    )
