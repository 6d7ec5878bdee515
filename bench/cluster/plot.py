"""The `bench cluster` chart: delivered vs predicted vs available hit rate per topology/mode, and balance."""

from __future__ import annotations

from pathlib import Path

KEYS = ("single", "affinity", "random", "round_robin", "least_load")


def plot_cluster(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [k for k in KEYS if k in result]
    fig, (hits, balance) = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.27
    for offset, (field, name) in enumerate((("hit_rate", "delivered"), ("predicted_hit_rate", "predicted (router)"),
                                           ("available_hit_rate", "available (canonical shadow)"))):
        values = [result[k].get(field) or 0 for k in labels]
        hits.bar([i + (offset - 1) * width for i in range(len(labels))], values, width, label=name)
    hits.set_xticks(range(len(labels)), labels)
    hits.set_ylabel("token hit rate")
    hits.set_ylim(0, 1)
    hits.legend(fontsize=8)
    hits.set_title(result.get("topology", "cluster"))
    routed = [k for k in labels if result[k].get("load_balance_max_over_mean") is not None]
    balance.bar(routed, [result[k]["load_balance_max_over_mean"] for k in routed], color="gray")
    balance.axhline(1.0, color="black", linewidth=0.8)
    balance.set_ylabel("requests per node, max / mean")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
