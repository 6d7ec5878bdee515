"""Pins for the radix cache: paths that are never evicted, bounded per namespace.

A pin holds a pin_ref on every node of its path, so eviction (which skips
pinned nodes) can never take them. A namespace's pinned tokens are the union
of its pinned nodes: two pins sharing a system prompt count it once. A match
that walks through the whole pinned path counts one hit for the pin. All namespaces'
pinned pages together stay within `max_pinned_pages` (None: no cap), so pins cannot
take the pool from running requests.

Quotas: a namespace's pins count against its own quota, or against the quota of the
namespace it shares one with (share_pin_quota: a tenant's salted namespaces share its
own), so one bound covers them all.

Timed pins (lease): a pin with a time to live on the cache's clock (`clock`, monotonic
seconds). Each match that walks through its whole path extends it to now + ttl (refresh
on hit); expire_pins() releases every timed pin whose time is up (the engine calls it
before each step), after which its path ages out by LRU like any cached prefix. A
namespace holds at most one timed pin per path end: leasing a prefix already leased
extends that pin instead of adding one.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Hashable

from engine.errors import PinCapacityError, PrefixNotCachedError, QuotaExceededError, UnknownPinError
from engine.radix_node import PinRecord, token_bytes

if TYPE_CHECKING:
    from engine.radix_node import NamespaceState, RadixNode


@dataclass(frozen=True)
class PrefixPins:
    """What a request asks the cache to hold once its prompt is computed (Engine.submit's prefix_pins).

    `prefixes`: (num_tokens, ttl_s) pairs; each prompt prefix of num_tokens (rounded down to a page) is
    leased for ttl_s seconds (RadixPins.lease) as soon as it is in the tree: at admission when it is
    already cached (which extends the lease), else when the prefill that computes it commits. The leases
    count against the pin quota of `quota_namespace` (None: the request's own namespace), which is set
    to `quota_tokens` first when that is given. A lease that the quota or the cache's cap on pinned
    pages refuses is logged and the prefix stays ordinary cache: never an error for the request.
    """

    prefixes: tuple[tuple[int, float], ...]
    quota_namespace: Hashable | None = None
    quota_tokens: int | None = None


class RadixPins:
    """Mixin of RadixCache: pin / unpin / set_pin_quota / pin_info."""

    def __init__(self, max_pinned_pages: int | None = None) -> None:
        self.max_pinned_pages = max_pinned_pages
        self.num_pinned_tokens = 0  # union of pinned nodes over every namespace
        self._pins: dict[int, PinRecord] = {}
        self._pins_at: dict[RadixNode, list[PinRecord]] = {}
        self._next_pin_id = 1
        self.clock = time.monotonic  # timed pins' clock (seconds); tests may swap it
        self._expiries: list[tuple[float, int]] = []  # (expires_at, pin_id), stale entries skipped on pop

    def set_pin_quota(self, namespace: Hashable, num_tokens: int | None) -> None:
        """Bound the namespace's pinned tokens (None = unlimited).

        Lowering the quota below what is pinned keeps existing pins; new pins
        are refused until the namespace is back under the quota.
        """
        if num_tokens is not None and num_tokens < 0:
            raise ValueError(f"pin quota must be >= 0 tokens, got {num_tokens}")
        self._namespace(namespace).pin_quota = num_tokens

    def share_pin_quota(self, namespace: Hashable, owner: Hashable) -> None:
        """Count `namespace`'s pins against `owner`'s quota from now on (its pinned tokens move there).
        `owner` must count against its own quota (no chains)."""
        state, owner_state = self._namespace(namespace), self._namespace(owner)
        if owner_state.quota_owner is not owner_state:
            raise ValueError(f"namespace {owner!r} shares another namespace's pin quota; it cannot own one")
        if state.quota_owner is owner_state:
            return
        state.quota_owner.quota_used -= state.pinned_tokens
        owner_state.quota_used += state.pinned_tokens
        state.quota_owner = owner_state

    def pin(self, namespace: Hashable, tokens) -> int:
        """Pin the cached page-aligned prefix of tokens; returns a pin id.

        Raises PrefixNotCachedError if that prefix is not fully cached,
        QuotaExceededError (changing nothing) if it would exceed the quota, and
        PinCapacityError (changing nothing) if it would pass max_pinned_pages.
        """
        data = token_bytes(tokens)
        state = self._namespace(namespace)
        wanted = (len(data) >> 2) // self.page_size * self.page_size
        match = self._walk_match(state, data, False)
        if wanted == 0 or match.length < wanted:
            raise PrefixNotCachedError(
                f"cannot pin {wanted} tokens in namespace {namespace!r}: only {match.length} are cached"
            )
        node = match.node
        num_new = self._unpinned_tokens(node)
        owner = state.quota_owner
        if owner.pin_quota is not None and owner.quota_used + num_new > owner.pin_quota:
            shared = "" if owner is state else f" (shared with {self._root_namespaces[id(owner.root)]!r})"
            raise QuotaExceededError(
                f"pin quota of namespace {namespace!r}{shared} exceeded: {owner.quota_used} tokens pinned "
                f"+ {num_new} new > quota {owner.pin_quota} tokens"
            )
        cap = None if self.max_pinned_pages is None else self.max_pinned_pages * self.page_size
        if cap is not None and self.num_pinned_tokens + num_new > cap:
            raise PinCapacityError(
                f"the cache's cap on pinned tokens is reached: {self.num_pinned_tokens} tokens pinned "
                f"+ {num_new} new > cap {cap} tokens"
            )
        self._add_pin_refs(node, state, +1)
        record = PinRecord(self._next_pin_id, namespace, node, wanted)
        self._next_pin_id += 1
        self._pins[record.pin_id] = record
        self._pins_at.setdefault(node, []).append(record)
        return record.pin_id

    def lease(self, namespace: Hashable, tokens, ttl_s: float) -> int:
        """Pin the cached page-aligned prefix of tokens for `ttl_s` seconds (a timed pin); returns its id.

        If the namespace already holds a timed pin ending exactly there, that pin is extended (to the later
        of its expiry and now + ttl_s, its ttl to the longer one) and its id returned; otherwise this is
        pin() (same errors, changing nothing when it raises) with a time to live.
        """
        if not ttl_s > 0:
            raise ValueError(f"a timed pin needs ttl_s > 0, got {ttl_s}")
        data = token_bytes(tokens)
        wanted = (len(data) >> 2) // self.page_size * self.page_size
        match = self._walk_match(self._namespace(namespace), data[: wanted * 4], False)
        if wanted and match.length == wanted:
            for record in self._pins_at.get(match.node, ()):
                if record.ttl_s is not None:
                    record.ttl_s = max(record.ttl_s, ttl_s)
                    self._extend(record, self.clock() + ttl_s)
                    return record.pin_id
        pin_id = self.pin(namespace, data)
        record = self._pins[pin_id]
        record.ttl_s, record.expires_at = ttl_s, self.clock() + ttl_s
        heapq.heappush(self._expiries, (record.expires_at, pin_id))
        return pin_id

    def expire_pins(self, now: float | None = None) -> int:
        """Release every timed pin whose time is up (at `now`, default the clock); returns how many."""
        now = self.clock() if now is None else now
        heap, num_expired = self._expiries, 0
        while heap and heap[0][0] <= now:
            _, pin_id = heapq.heappop(heap)
            record = self._pins.get(pin_id)
            if record is None or record.expires_at is None:
                continue  # unpinned meanwhile
            if record.expires_at > now:  # refreshed since this entry was pushed
                heapq.heappush(heap, (record.expires_at, pin_id))
                continue
            self.unpin(pin_id)
            num_expired += 1
        return num_expired

    @staticmethod
    def _extend(record: PinRecord, expires_at: float) -> None:
        """Move a timed pin's expiry later (never earlier); its heap entry is fixed when popped."""
        if expires_at > record.expires_at:
            record.expires_at = expires_at

    def unpin(self, pin_id: int) -> None:
        """Release a pin; its path becomes evictable again unless locked or pinned otherwise."""
        record = self._pin_record(pin_id)
        del self._pins[pin_id]
        at_node = self._pins_at[record.node]
        at_node.remove(record)
        if not at_node:
            del self._pins_at[record.node]
        self._add_pin_refs(record.node, self._namespaces[record.namespace], -1)

    def pin_info(self, pin_id: int) -> dict:
        """{"pin_id", "namespace", "tokens", "hits"} of a live pin."""
        return self._pin_record(pin_id).as_dict()

    def _pin_record(self, pin_id: int) -> PinRecord:
        record = self._pins.get(pin_id)
        if record is None:
            raise UnknownPinError(f"no pin with id {pin_id!r}")
        return record

    def _unpinned_tokens(self, node: RadixNode) -> int:
        num_tokens = 0
        while node.parent is not None:
            if not node.pin_ref:
                num_tokens += len(node.key) >> 2
            node = node.parent
        return num_tokens

    def _add_pin_refs(self, node: RadixNode, state: NamespaceState, delta: int) -> None:
        bottom = node
        while node.parent is not None:
            was_pinned = node.pin_ref > 0
            node.pin_ref += delta
            if was_pinned != (node.pin_ref > 0):
                num_tokens = len(node.key) >> 2
                state.pinned_tokens += num_tokens if delta > 0 else -num_tokens
                state.quota_owner.quota_used += num_tokens if delta > 0 else -num_tokens
                self.num_pinned_tokens += num_tokens if delta > 0 else -num_tokens
                if not node.lock_ref:
                    self.num_evictable_pages -= delta * (len(node.pages) >> 2)
            node = node.parent
        if delta < 0 and not bottom.children:
            self._push_if_evictable(bottom)

    def _count_pin_hits(self, node: RadixNode) -> None:
        """One hit for each pin ending at `node` (its whole path matched); a timed one is refreshed."""
        now = None
        for record in self._pins_at.get(node, ()):
            record.hits += 1
            if record.ttl_s is not None:
                now = self.clock() if now is None else now
                self._extend(record, now + record.ttl_s)


def check_prefix_pins(pins: PrefixPins | None, num_prompt_tokens: int) -> None:
    """ValueError unless every prefix lies within the prompt and lives a positive time."""
    for num_tokens, ttl_s in pins.prefixes if pins is not None else ():
        if not 0 <= num_tokens <= num_prompt_tokens:
            raise ValueError(f"a pinned prefix of {num_tokens} tokens lies outside the prompt of {num_prompt_tokens}")
        if not ttl_s > 0:
            raise ValueError(f"a pinned prefix needs ttl_s > 0, got {ttl_s}")
    if pins is not None and pins.quota_tokens is not None and pins.quota_tokens < 0:
        raise ValueError(f"pin quota must be >= 0 tokens, got {pins.quota_tokens}")
