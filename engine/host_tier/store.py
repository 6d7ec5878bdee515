"""HostPageStore: refcounted KV pages in shared memory with a radix index per namespace.

Contracts (every method takes the cross-process lock; see layout.py for the state):
  * match(namespace, tokens) returns the slots of the longest committed
    page-aligned prefix and refreshes their LRU time; with hold=True this
    holder gets one reference on each (release() gives them back). References
    always cover a whole path from the root, so a referenced page's ancestors
    are referenced too.
  * allocate_batch(seqs) reserves, for every sequence at once, a slot for each
    page the index does not hold yet (pages shared by two sequences of the batch
    get one slot) and a reference on each page it does hold: all or nothing.
    When the store is short it evicts LRU unreferenced leaves first; if even
    that cannot make room it returns None and leaves no trace (no reserved slot,
    no reference, nothing evicted). The caller writes the reserved pages' data,
    then commit() publishes them (a page another process committed meanwhile
    wins, the duplicate slot is freed) or abort() frees them; both drop the
    batch's references.
  * evict(n) frees least-recently-used committed pages that nobody references
    and that have no children, until n are freed or none is left.
  * a holder that dies (or whose lease expires) loses its references and
    reservations at the next sweep(), which allocate_batch and register run.
Invariant: every slot is FREE, RESERVED (owned by exactly one holder) or
COMMITTED (in the index exactly once); refcount == holder_refs.sum(axis=0).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

import engine.host_tier.holders as holders
import engine.host_tier.index as index
import engine.host_tier.slot_states as slot_states
from engine.host_tier.layout import COMMITTED, FREE, RESERVED, attach_segments, create_segments, untrack_segments
from engine.host_tier.lock import StoreLock


class HeldSlots(list):
    """match()'s slots, remembering the holder generation whose references they are."""

    def __init__(self, slots, generation: int | None) -> None:
        super().__init__(slots)
        self.generation = generation


@dataclass
class Reservation:
    """What allocate_batch took: per sequence, (page index, slot) for each page to write."""

    holder: int
    generation: int
    writes: list[list[tuple[int, int]]]
    held: list[int] = field(default_factory=list)  # committed slots referenced by the batch
    new: list[int] = field(default_factory=list)  # reserved slots, parents before children
    is_open: bool = True


class HostPageStore:
    """A process's handle on a shared store: create() it once, attach() from the others."""

    def __init__(self, name: str, layout, *, lease_s: float, is_owner: bool) -> None:
        self.name = name
        self.layout = layout
        self.lease_s = lease_s
        self.is_owner = is_owner
        self.page_size = layout.field("page_size")
        self.page_bytes = layout.field("page_bytes")
        self.num_pages = layout.field("num_pages")
        self.lock = StoreLock(name)
        with self.lock:
            self.holder, self.generation = holders.register(layout, lease_s)

    @classmethod
    def create(cls, name: str, num_pages: int, page_size: int, page_bytes: int, *, max_holders: int = 16,
               lease_s: float = 60.0) -> "HostPageStore":
        if num_pages < 1 or page_size < 1 or page_bytes < 0:
            raise ValueError(f"bad host store shape: {num_pages} pages of {page_size} tokens, {page_bytes} bytes")
        return cls(name, create_segments(name, num_pages, page_size, page_bytes, max_holders),
                   lease_s=lease_s, is_owner=True)

    @classmethod
    def attach(cls, name: str, *, lease_s: float = 60.0, untrack: bool = True) -> "HostPageStore":
        """Map a store another process created. untrack=False in a forked child, which shares
        its parent's resource tracker (the creator's registration must stay there)."""
        layout = attach_segments(name, untrack=False)
        if untrack and os.getpid() not in layout.holder_pid:  # else this process created it: it stays tracked
            untrack_segments(layout)
        return cls(name, layout, lease_s=lease_s, is_owner=False)

    def close(self) -> None:
        """Give back this holder's references and unmap; the creator also unlinks the segments."""
        if self.layout is None:
            return
        with self.lock:
            if int(self.layout.holder_generation[self.holder]) == self.generation:
                holders.drop_holder(self.layout, self.holder)
        meta, data = self.layout.meta, self.layout.data
        self.layout.release()
        self.layout = None
        for segment in (meta, data):
            segment.close()
            if self.is_owner:
                segment.unlink()
        self.lock.close()

    # ----- helpers -----
    def _pages_of(self, tokens) -> np.ndarray:
        data = np.frombuffer(tokens, dtype=np.int32) if isinstance(tokens, bytes) else np.asarray(tokens, dtype=np.int32)
        n = len(data) // self.page_size
        return data[: n * self.page_size].reshape(n, self.page_size)  # (num_pages, page_size)

    def _touch(self) -> None:
        """Renew this holder's lease; if a sweep took the row (the lease ran out), register again.

        What the old row held is gone by then: release() of slots matched before
        is a no-op and commit()/abort() of an older reservation raise LeaseExpiredError.
        """
        if not holders.renew(self.layout, self.holder, self.generation, self.lease_s):
            self.holder, self.generation = holders.register(self.layout, self.lease_s)

    def _tick(self) -> int:
        return self.layout.add_field("clock", 1)

    def _ref(self, slots: list[int], delta: int) -> None:
        if slots:
            ids = np.asarray(slots, dtype=np.intp)
            np.add.at(self.layout.refcount, ids, delta)
            np.add.at(self.layout.holder_refs[self.holder], ids, delta)

    def _walk(self, namespace, pages: np.ndarray) -> tuple[list[int], list[int]]:
        """(slots of the longest committed prefix, chained keys of all pages)."""
        keys = index.chain_keys(namespace, pages)
        ns = index.namespace_hash(namespace)
        slots, parent = [], -1
        for key, page in zip(keys, pages):
            slot = index.find(self.layout, key, ns, parent, page)
            if slot < 0:
                break
            slots.append(slot)
            parent = slot
        return slots, keys

    # ----- match / release -----
    def match(self, namespace, tokens, *, hold: bool = True) -> "HeldSlots":
        """Slots of the longest committed page-aligned prefix of tokens (see the contracts)."""
        with self.lock:
            self._touch()
            slots, _ = self._walk(namespace, self._pages_of(tokens))
            if slots:
                self.layout.last_access[slots] = self._tick()
                if hold:
                    self._ref(slots, 1)
            return HeldSlots(slots, self.generation if hold else None)

    def release(self, slots: list[int]) -> None:
        """Drop one reference per slot that this holder took: pass back a match()'s whole result."""
        if not slots:
            return
        with self.lock:
            self._touch()
            if getattr(slots, "generation", self.generation) != self.generation:
                return  # taken before a sweep, which gave them back already
            mine = self.layout.holder_refs[self.holder]
            ids = np.asarray(slots, dtype=np.intp)
            if (np.bincount(ids, minlength=self.num_pages) > mine).any():
                raise ValueError("release() of a host page this process does not hold")
            self._ref(slots, -1)

    # ----- allocate / commit / abort -----
    def allocate_batch(self, seqs: list[tuple[object, list[int]]]) -> Reservation | None:
        """Reserve the missing pages of every sequence at once, or nothing (see the contracts)."""
        with self.lock:
            layout = self.layout
            self._touch()
            holders.sweep(layout)
            plans, held, pending = [], [], {}  # pending: chained key -> plan entry of a new page
            for namespace, tokens in seqs:
                pages = self._pages_of(tokens)
                slots, keys = self._walk(namespace, pages)
                held.extend(slots)
                ns = index.namespace_hash(namespace)
                plan = []
                for i in range(len(slots), len(pages)):
                    entry = pending.get(keys[i])  # a page two sequences of the batch share gets one slot
                    if entry is None:
                        entry = pending[keys[i]] = [len(pending), ns, pages[i], keys[i],
                                                    slot_states.entry_parent(plan, slots)]
                    plan.append((i, entry))
                plans.append(plan)
            num_new = len(pending)
            num_free = int(np.count_nonzero(layout.state == FREE))
            self._ref(held, 1)  # the batch's hold on existing prefixes: they cannot be evicted below
            if num_new > num_free + slot_states.num_evictable(layout):
                self._ref(held, -1)
                return None
            if num_new > num_free:
                self.evict(num_new - num_free)
            free = np.flatnonzero(layout.state == FREE)[:num_new].tolist()
            if len(free) < num_new:  # only if references broke the whole-path rule (a partial release)
                self._ref(held, -1)
                return None
            entries = sorted(pending.values(), key=lambda e: e[0])
            for entry, slot in zip(entries, free):
                entry.append(slot)
            slot_states.reserve(layout, self.holder, entries)
            writes = [[(i, entry[slot_states.SLOT]) for i, entry in plan] for plan in plans]
            return Reservation(self.holder, self.generation, writes, held, [e[slot_states.SLOT] for e in entries])

    def commit(self, reservation: Reservation) -> int:
        """Publish a reservation's written pages in the index; returns pages newly committed."""
        with self.lock:
            self._check_open(reservation)
            num_new = slot_states.commit(self.layout, reservation.new, self._tick())
            self.layout.add_field("num_committed", num_new)
            self._close(reservation)
            return num_new

    def abort(self, reservation: Reservation) -> None:
        """Free a reservation's slots and drop its references, as if it never happened."""
        with self.lock:
            self._check_open(reservation)
            for slot in reservation.new:
                slot_states.free(self.layout, slot)
            self._close(reservation)

    def _check_open(self, reservation: Reservation) -> None:
        self._touch()
        if reservation.generation != self.generation:
            reservation.is_open = False
            raise holders.LeaseExpiredError("the reservation's lease expired: its slots were swept")
        if not reservation.is_open:
            raise ValueError("reservation already committed or aborted")

    def _close(self, reservation: Reservation) -> None:
        self._ref(reservation.held, -1)
        reservation.is_open = False

    # ----- eviction -----
    def evict(self, num_pages: int) -> int:
        """Free up to num_pages LRU unreferenced childless committed pages; returns pages freed."""
        with self.lock:
            freed = slot_states.evict(self.layout, num_pages)
            self.layout.add_field("num_evicted", freed)
            return freed

    def sweep(self) -> int:
        """Take back what dead or expired holders held; returns slots given back."""
        with self.lock:
            return holders.sweep(self.layout)

    def renew(self) -> None:
        with self.lock:
            self._touch()

    # ----- data and stats -----
    def page(self, slot: int) -> np.ndarray:
        """The bytes of one page slot (a view into shared memory)."""
        return self.layout.pages[slot]

    def stats(self) -> dict:
        with self.lock:
            layout = self.layout
            used = int(np.count_nonzero(layout.state == COMMITTED))
            return {
                "capacity_pages": self.num_pages,
                "capacity_tokens": self.num_pages * self.page_size,
                "capacity_bytes": self.num_pages * self.page_bytes,
                "used_pages": used,
                "used_tokens": used * self.page_size,
                "reserved_pages": int(np.count_nonzero(layout.state == RESERVED)),
                "referenced_pages": int(np.count_nonzero(layout.refcount)),
                "evicted_pages": layout.field("num_evicted"),
                "committed_pages": layout.field("num_committed"),
                "holders": int(np.count_nonzero(layout.holder_pid)),
            }

