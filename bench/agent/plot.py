"""The agent benchmark as one PNG: hit rates (raw, canonical, shadow raw-order) and wall times."""

from __future__ import annotations


def plot_agent_bench(result: dict, path: str) -> None:
    """Write a two-panel bar chart of `result` (the dict run_agent_bench returns) to `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (hits, walls) = plt.subplots(1, 2, figsize=(9, 3.6))
    labels = ["raw order", "canonical"]
    rates = [result["hit_rate_raw"], result["hit_rate_canonical"]]
    if result.get("shadow_hit_rate_raw_order") is not None:
        labels.append("shadow\n(raw order)")
        rates.append(result["shadow_hit_rate_raw_order"])
    hits.bar(labels, rates, color=["#b0b0b0", "#2a7ab9", "#e0a030"][: len(rates)])
    hits.set_ylim(0, 1)
    hits.set_title("prefix-cache hit rate (tokens)")
    for x, rate in enumerate(rates):
        hits.text(x, rate + 0.02, f"{rate:.2f}", ha="center")
    times = [result["wall_s_raw"], result["wall_s_canonical"]]
    walls.bar(labels[:2], times, color=["#b0b0b0", "#2a7ab9"])
    walls.set_ylim(0, max(times) * 1.15)
    walls.set_title(f"wall time, {result['requests']} requests (s)")
    for x, seconds in enumerate(times):
        walls.text(x, seconds * 1.01, f"{seconds:.1f}", ha="center")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
