"""Routing policies: which backend first, and which one a failed request is retried on.

    order = RoutingPolicy(settings.routing).order(key, backends, loads)

Modes (settings.routing.mode):
- affinity: token-exact prefix affinity. The key is the cache namespace plus either the client's
  `prompt_cache_key` or the hash of the canonical system + tools prefix's token ids. A key seen before goes
  to the node it went to (an LRU table over the hash ring); a cold key goes to the least-loaded
  node, ties broken by the key's rendezvous rank (so on an idle fleet it is plain consistent
  hashing: adding a node moves only the keys that now rank it first). Bounded load, in tokens: a
  node takes a key while its load is under (1 + epsilon) * (total load + this request) / nodes
  + this request (one request's slack, so a single request in flight never pushes a key away),
  or while its load is under `spill_floor_tokens` (at low load the cache is worth more than the
  balance: two keys sharing a node at a handful of requests in flight must not scatter their
  prefixes over the fleet); otherwise the key's next node in rendezvous order that is under it
  takes the request.
- precise: the node that really holds the longest prefix of this request's tokens, by its own KV
  events (routing/kv_index.py; `cached` gives each node's cached tokens), among the nodes under the
  bounded load above (ties: the less loaded); when no node under it holds a block of the prefix, as
  affinity (and the key then remembers the node the cache chose). Nodes without events score 0.
- random, round_robin, least_load: the baselines `bench cluster` compares against.
In every mode nodes that are down (routing/health.py) or report more than `overload_tokens`
queued + running tokens are skipped while others are available; the failover node is the
least-loaded other one ("retry once on another node").
"""

from __future__ import annotations

import itertools
import math
import random
from collections import OrderedDict
from typing import Sequence

from gateway.routing.affinity import rank

MODES = ("precise", "affinity", "random", "round_robin", "least_load")


SPILL_FLOOR_TOKENS = 16384  # the default floor (RoutingSettings.spill_floor_tokens takes it too)


class RoutingPolicy:
    def __init__(self, mode: str = "affinity", *, epsilon: float = 0.5, spill_floor_tokens: int = SPILL_FLOOR_TOKENS,
                 overload_tokens: int = 0, max_keys: int = 100_000, rng: random.Random | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown routing mode {mode!r}; one of {MODES}")
        self.mode = mode
        self.epsilon = epsilon
        self.spill_floor_tokens = spill_floor_tokens
        self.overload_tokens = overload_tokens
        self.max_keys = max_keys
        self._sticky: OrderedDict[str, str] = OrderedDict()
        self._turn = itertools.count()
        self._rng = rng or random.Random()

    def order(self, key: str, names: Sequence[str], *, admits: Sequence[bool], loads: Sequence[int],
              weights: Sequence[float] | None = None, num_tokens: int = 1,
              cached: Sequence[int] | None = None) -> list[int]:
        """Indexes of `names`: the chosen backend, then at most one failover; [] when none admits.
        `cached`: each node's cached tokens of this request (precise mode; None: none known)."""
        usable = [i for i in range(len(names)) if admits[i]]
        if not usable:
            return []
        light = [i for i in usable if not self.overload_tokens or loads[i] <= self.overload_tokens]
        usable = light or usable
        if self.mode == "precise" and cached is not None:
            first = self._precise(key, names, usable, loads, weights, max(1, num_tokens), cached)
        else:
            first = self._choose(key, names, usable, loads, weights, max(1, num_tokens))
        others = sorted((i for i in usable if i != first), key=lambda i: (loads[i], i))
        return [first] + others[:1]

    def _choose(self, key, names, usable, loads, weights, num_tokens) -> int:
        if self.mode == "random":
            return self._rng.choice(usable)
        if self.mode == "round_robin":
            return usable[next(self._turn) % len(usable)]
        if self.mode == "least_load":
            return min(usable, key=lambda i: (loads[i], i))
        return self._affinity(key, names, usable, loads, weights, num_tokens)

    def _capacity(self, usable, loads, num_tokens) -> int:
        """The bounded load: a node under it may take the request (see the module docstring)."""
        total = sum(loads[i] for i in usable) + num_tokens
        return max(math.ceil((1.0 + self.epsilon) * total / len(usable)) + num_tokens, self.spill_floor_tokens)

    def _precise(self, key, names, usable, loads, weights, num_tokens, cached) -> int:
        capacity = self._capacity(usable, loads, num_tokens)
        under = [i for i in usable if loads[i] < capacity]
        best = max(under, key=lambda i: (cached[i], -loads[i]), default=None)
        if best is None or cached[best] <= 0:
            return self._affinity(key, names, usable, loads, weights, num_tokens)
        self._sticky[key] = names[best]
        self._sticky.move_to_end(key)
        if len(self._sticky) > self.max_keys:
            self._sticky.popitem(last=False)
        return best

    def _affinity(self, key, names, usable, loads, weights, num_tokens) -> int:
        ranking = [i for i in rank(key, names, weights) if i in usable]
        capacity = self._capacity(usable, loads, num_tokens)
        sticky = self._sticky.get(key)
        if sticky is not None:
            self._sticky.move_to_end(key)
            index = names.index(sticky) if sticky in names else None
            if index in usable and loads[index] < capacity:
                return index
            return next((i for i in ranking if loads[i] < capacity), ranking[0])
        position = {i: n for n, i in enumerate(ranking)}
        chosen = min(usable, key=lambda i: (loads[i], position[i]))
        self._sticky[key] = names[chosen]
        if len(self._sticky) > self.max_keys:
            self._sticky.popitem(last=False)
        return chosen
