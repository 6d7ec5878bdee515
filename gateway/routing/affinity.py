"""Prefix affinity: the same canonical static prefix goes to the same replica.

Rendezvous (highest-random-weight) hashing ranks every backend for a key; the key is the
cache namespace plus the hash of the canonical static prefix, so each tenant's hot prefixes stay
on one replica, where that replica's own prefix cache keeps hitting. Adding or removing a backend
moves only the keys that ranked it first.

Load awareness is "consistent hashing with bounded loads": a backend may take a request only while
its in-flight count is below ceil((1 + epsilon) * (total_in_flight + 1) / num_healthy); otherwise
the next backend in that key's ranking takes it. Unhealthy backends rank last, so failover walks
the same order for every request of a key (and comes back when the backend recovers).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Sequence

DEFAULT_EPSILON = 0.5


def rendezvous_score(key: str, backend_name: str, weight: float = 1.0) -> float:
    """The weighted rendezvous score of `backend_name` for `key` (higher ranks first).

    score = -weight / ln(u), u uniform in (0, 1) from sha256(key, name): the probability that a
    backend ranks first is proportional to its weight.
    """
    digest = hashlib.sha256(f"{key}\x00{backend_name}".encode()).digest()
    u = (int.from_bytes(digest[:8], "big") + 1) / (2**64 + 2)
    return -max(weight, 1e-9) / math.log(u)


def rank(key: str, names: Sequence[str], weights: Sequence[float] | None = None) -> list[int]:
    """Indexes of `names` in rendezvous order for `key` (deterministic, ties broken by name)."""
    weights = weights if weights is not None else [1.0] * len(names)
    scored = [(-rendezvous_score(key, name, w), name, i) for i, (name, w) in enumerate(zip(names, weights))]
    return [i for _, _, i in sorted(scored)]


def affinity_key(namespace: str, prefix_hash: str) -> str:
    """The routing key of a request: its cache domain plus its canonical static-prefix hash."""
    return f"{namespace}|{prefix_hash}"


@dataclass
class LoadTracker:
    """In-flight request counts per backend name (event-loop only: no locking)."""

    num_in_flight: dict[str, int] = field(default_factory=dict)

    def begin(self, name: str) -> None:
        self.num_in_flight[name] = self.num_in_flight.get(name, 0) + 1

    def end(self, name: str) -> None:
        count = self.num_in_flight.get(name, 0)
        if count <= 0:
            raise RuntimeError(f"end without begin for backend {name!r}")
        self.num_in_flight[name] = count - 1

    def load(self, name: str) -> int:
        return self.num_in_flight.get(name, 0)


def order_candidates(
    key: str,
    names: Sequence[str],
    *,
    weights: Sequence[float] | None = None,
    healthy: Sequence[bool] | None = None,
    loads: Sequence[int] | None = None,
    epsilon: float = DEFAULT_EPSILON,
) -> list[int]:
    """The order in which to try backends for `key`: the preferred one first, failovers after.

    The rendezvous ranking, with unhealthy backends moved to the end; among healthy ones the first
    whose load is under the bounded-load capacity goes first (the rest keep their rank order).
    """
    order = rank(key, names, weights)
    healthy = healthy if healthy is not None else [True] * len(names)
    loads = loads if loads is not None else [0] * len(names)
    up = [i for i in order if healthy[i]]
    down = [i for i in order if not healthy[i]]
    if not up:
        return down
    capacity = math.ceil((1.0 + epsilon) * (sum(loads[i] for i in up) + 1) / len(up))
    first = next((i for i in up if loads[i] < capacity), up[0])
    return [first] + [i for i in up if i != first] + down
