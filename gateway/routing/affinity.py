"""Prefix affinity: the same canonical system + tools prefix goes to the same replica.

Rendezvous (highest-random-weight) hashing ranks every backend for a key; the key is the
cache namespace plus the hash of the canonical system + tools prefix, so each tenant's hot prefixes stay
on one replica, where that replica's own prefix cache keeps hitting. Adding or removing a backend
moves only the keys that ranked it first.

Load awareness ("consistent hashing with bounded loads") and the other routing modes live in
routing/policy.py, which ranks with `rank`.
"""

from __future__ import annotations

import hashlib
import math
from typing import Sequence

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
