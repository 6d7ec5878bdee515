"""Waiting-queue policies: the order in which waiting requests are considered.

  fcfs        arrival order (a preempted request goes back to the front).
  lpm         longest cached prefix first; ties keep arrival order.
  dfs-weight  walk the page-block tree of the waiting prompts depth-first:
              the branch with the longest resident (cached) prefix first, then
              heavier subtrees (more waiting requests below), so requests that
              share a branch run back to back while it is resident (SGLang's
              DFS-weight, over the prompts' full prefixes rather than only
              their cached part, so cold groups cluster too).

Every policy here is a pure function of the waiting list and each request's
current match length; none touches the cache. The default policy, "fair"
(fair across tenants, lpm within one), keeps per-tenant counters between
steps, so it lives in engine.fair_queue and the scheduler calls it directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.request import Request


class _TrieNode:
    __slots__ = ("children", "requests", "weight", "first_arrival", "num_cached")

    def __init__(self) -> None:
        self.children: dict[bytes, _TrieNode] = {}
        self.requests: list[Request] = []
        self.weight = 0
        self.first_arrival = 0
        self.num_cached = 0  # longest cached prefix among the requests below


def order_fcfs(waiting: Sequence[Request], match_length: Callable[[Request], int], page_size: int) -> list[Request]:
    return list(waiting)


def order_lpm(waiting: Sequence[Request], match_length: Callable[[Request], int], page_size: int) -> list[Request]:
    lengths = {id(req): match_length(req) for req in waiting}
    return sorted(waiting, key=lambda req: -lengths[id(req)])


def order_dfs_weight(
    waiting: Sequence[Request], match_length: Callable[[Request], int], page_size: int
) -> list[Request]:
    """Depth-first over the page-block trie of the waiting prompts, heaviest child first."""
    roots: dict[str, _TrieNode] = {}
    for arrival, req in enumerate(waiting):
        num_cached = match_length(req)
        node = roots.setdefault(req.namespace, _TrieNode())
        node.weight += 1
        node.num_cached = max(node.num_cached, num_cached)
        for block in req.prompt_blocks(page_size):
            child = node.children.get(block)
            if child is None:
                child = node.children[block] = _TrieNode()
                child.first_arrival = arrival
            child.weight += 1
            child.num_cached = max(child.num_cached, num_cached)
            node = child
        node.requests.append(req)
    ordered: list[Request] = []
    by_residency_then_weight = lambda n: (-n.num_cached, -n.weight, n.first_arrival)  # noqa: E731
    for root in sorted(roots.values(), key=by_residency_then_weight):
        stack = [root]
        while stack:
            node = stack.pop()
            ordered.extend(node.requests)
            children = sorted(node.children.values(), key=by_residency_then_weight)
            stack.extend(reversed(children))
    return ordered


POLICY_ORDERS = {"fcfs": order_fcfs, "lpm": order_lpm, "dfs-weight": order_dfs_weight}


def order_waiting(
    policy: str, waiting: Sequence[Request], match_length: Callable[[Request], int], page_size: int
) -> list[Request]:
    """The waiting requests in the order the scheduler should try to admit them (stateless policies)."""
    try:
        order = POLICY_ORDERS[policy]
    except KeyError:
        raise ValueError(f"unknown policy {policy!r}; choose one of {sorted(POLICY_ORDERS)}") from None
    return order(waiting, match_length, page_size)
