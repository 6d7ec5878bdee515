"""FairQueue: the `fair` waiting-queue policy — fair across keys (tenants), longest prefix first within a key.

Service is counted in tokens the forward computes for a key (prefill tokens
that were not cached, plus one per decoded token: what the steps spend on it),
plus `cached_token_cost` (0..1) per prompt token the cache served, charged
once when the request is first admitted. A cached token is cheaper, not free:
its pages occupy the pool and every decode step of the request reads them, and
a tenant whose prompts are all cache hits would otherwise count as nearly idle
however many slots its requests hold. Each key k has a virtual counter

    V_k += num_tokens / weight_k               for every chunk computed for k
    V_k += cost * num_cached / weight_k        when a request of k is first admitted

and the waiting requests are ordered by repeatedly taking the key with the
smallest counter (plus the tentative cost of what this ordering already put
ahead of it: its requests' uncached tokens and discounted cached ones), and from that key its request
with the longest cached prefix (ties: arrival order). This is weighted fair
queuing on tokens in the form of a virtual token counter (Sheng et al.,
"Fairness in Serving Large Language Models", OSDI 2024), with the within-key
order of SGLang's longest-prefix-match.

Invariants:
  * order() returns a permutation of the waiting list (work conservation: the
    scheduler is offered every request, so nothing waits while something could
    be admitted), and within each key the requests come longest cached prefix
    first, ties in arrival order.
  * A key that becomes active (waiting or running work after none) has its
    counter raised to the smallest counter among the keys already active, so
    idle time banks no credit and a newcomer cannot starve the others; it
    then ties with that smallest counter; ties go to the key with fewer
    requests running (so a newcomer takes the next free slot), then to the
    key whose head request arrived first.
  * No starvation: while key k waits, another key j is put ahead of it only
    while V_j <= V_k; every service raises V_j by at least 1 / weight_j, and
    the gap between active keys' counters stays within one request's cost
    (C / weight). With n keys and equal weights, k therefore leads the order
    after at most (n - 1) * (C + 1) admissions of others.
  * Memory: a key's counter is dropped when it has no work and its counter is
    at or below the smallest active one (raising it on return gives the same
    value), and every counter is dropped when no key has work, so idle keys
    cost nothing and an idle engine holds no debts.

Pure bookkeeping: order() never touches the cache; the scheduler calls
charge() for every chunk after each forward.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.request import Request


class FairQueue:
    """Per-key virtual token counters and the fair, cache-aware order they give."""

    def __init__(self, cached_token_cost: float = 0.0) -> None:
        if not 0.0 <= cached_token_cost <= 1.0:
            raise ValueError(f"cached_token_cost must be in [0, 1], got {cached_token_cost}")
        self.cached_token_cost = cached_token_cost
        self._served: dict[str, float] = {}  # V_k of every key that has (or may soon have) work
        self._active: set[str] = set()

    def counter(self, key: str) -> float:
        """V_key (0.0 for a key never seen)."""
        return self._served.get(key, 0.0)

    def charge(self, req: Request, num_tokens: float) -> None:
        """Count num_tokens computed for req's key (weighted by the request's weight)."""
        key = req.fairness_key
        self._served[key] = self._served.get(key, 0.0) + num_tokens / req.weight

    def charge_cached(self, req: Request, num_cached: int) -> None:
        """Count the prompt tokens the cache served req, at cached_token_cost each (once per request)."""
        self.charge(req, self.cached_token_cost * num_cached)

    def order(self, waiting: Sequence[Request], match_length: Callable[[Request], int],
              running: Iterable[Request] = ()) -> list[Request]:
        """The waiting requests, fairest first (see the module docstring)."""
        groups = _lpm_groups(waiting, match_length)
        running = list(running)
        self._track_activity(groups, {req.fairness_key for req in running})
        num_running = Counter(req.fairness_key for req in running)
        heap = [(self._served[key], num_running[key], first, key) for key, (first, _) in groups.items()]
        heapq.heapify(heap)
        ordered: list[Request] = []
        while heap:
            virtual, busy, first, key = heapq.heappop(heap)
            _, requests = groups[key]
            req = requests.pop()
            ordered.append(req)
            if requests:
                cached = match_length(req)
                cost = (max(1, req.num_tokens - cached) + self.cached_token_cost * cached) / req.weight
                heapq.heappush(heap, (virtual + cost, busy + 1, first, key))
        return ordered

    def _track_activity(self, groups: dict, running_keys: set[str]) -> None:
        busy = set(groups) | running_keys
        still_active = self._active & busy
        if not still_active:  # the engine went idle: every debt is forgiven, all start equal
            self._served.clear()
        floor = min((self._served[k] for k in still_active), default=0.0)
        for key in busy - still_active:
            self._served[key] = max(self._served.get(key, 0.0), floor)
        self._active = busy
        for key in [k for k, v in self._served.items() if k not in busy and v <= floor]:
            del self._served[key]


def _lpm_groups(waiting: Sequence[Request], match_length: Callable[[Request], int]
                ) -> dict[str, tuple[int, list[Request]]]:
    """key -> (arrival index of its first waiting request, its requests, the next to take LAST)."""
    groups: dict[str, tuple[int, list[Request]]] = {}
    for arrival, req in enumerate(waiting):
        groups.setdefault(req.fairness_key, (arrival, []))[1].append(req)
    for _, requests in groups.values():
        lengths = {id(r): match_length(r) for r in requests}
        # stable sort by ascending length, reversed: longest first, earliest first among equals, popped from the end
        requests.sort(key=lambda r: -lengths[id(r)])
        requests.reverse()
    return groups
