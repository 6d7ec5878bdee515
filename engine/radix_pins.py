"""Pins for the radix cache: paths that are never evicted, bounded per namespace.

A pin holds a pin_ref on every node of its path, so eviction (which skips
pinned nodes) can never take them. A namespace's pinned tokens are the union
of its pinned nodes: two pins sharing a system prompt count it once. A match
that walks through the whole pinned path counts one hit for the pin. All namespaces'
pinned pages together stay within `max_pinned_pages` (None: no cap), so pins cannot
take the pool from running requests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Hashable

from engine.errors import PinCapacityError, PrefixNotCachedError, QuotaExceededError, UnknownPinError
from engine.radix_node import PinRecord, token_bytes

if TYPE_CHECKING:
    from engine.radix_node import NamespaceState, RadixNode


class RadixPins:
    """Mixin of RadixCache: pin / unpin / set_pin_quota / pin_info."""

    def __init__(self, max_pinned_pages: int | None = None) -> None:
        self.max_pinned_pages = max_pinned_pages
        self.num_pinned_tokens = 0  # union of pinned nodes over every namespace
        self._pins: dict[int, PinRecord] = {}
        self._pins_at: dict[RadixNode, list[PinRecord]] = {}
        self._next_pin_id = 1

    def set_pin_quota(self, namespace: Hashable, num_tokens: int | None) -> None:
        """Bound the namespace's pinned tokens (None = unlimited).

        Lowering the quota below what is pinned keeps existing pins; new pins
        are refused until the namespace is back under the quota.
        """
        if num_tokens is not None and num_tokens < 0:
            raise ValueError(f"pin quota must be >= 0 tokens, got {num_tokens}")
        self._namespace(namespace).pin_quota = num_tokens

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
        if state.pin_quota is not None and state.pinned_tokens + num_new > state.pin_quota:
            raise QuotaExceededError(
                f"pin quota of namespace {namespace!r} exceeded: {state.pinned_tokens} tokens pinned "
                f"+ {num_new} new > quota {state.pin_quota} tokens"
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
                self.num_pinned_tokens += num_tokens if delta > 0 else -num_tokens
                if not node.lock_ref:
                    self.num_evictable_pages -= delta * (len(node.pages) >> 2)
            node = node.parent
        if delta < 0 and not bottom.children:
            self._push_if_evictable(bottom)

    def _count_pin_hits(self, node: RadixNode) -> None:
        for record in self._pins_at.get(node, ()):
            record.hits += 1
