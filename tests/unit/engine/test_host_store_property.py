"""Property test: the host page store driven by two processes against a reference model.

This process (actor 0) and a forked worker (actor 1, tests/support/host_store_worker.py)
allocate batches, write and commit or abort them, match (taking references),
release and evict on one shared store; the worker is sometimes killed with
SIGKILL while it holds references and reservations. The model knows which
references and reservations each actor holds; after every step the store's
shared state must agree with it:
  * no page lost: every slot is free, reserved by exactly one open reservation,
    or committed and in the index exactly once;
  * none double-owned: reservations are disjoint; a committed page's bytes are
    still the ones written for its own prefix;
  * a failed allocation leaves no trace (the shared arrays are unchanged) and
    fails only when the store could not make room;
  * a killed holder's references and reservations come back at the sweep.
"""

import itertools
import os
from collections import Counter

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test
from tests.support.host_store_worker import Worker, fill_byte, write_reserved

from engine.host_tier.layout import COMMITTED, FREE, RESERVED
from engine.host_tier.store import HostPageStore

NUM_PAGES, PAGE_SIZE, PAGE_BYTES = 10, 2, 8
MIN_STEPS = 2000
SNAPSHOT = ("state", "refcount", "holder_refs", "table", "parent", "children", "key", "owner")
names = itertools.count()

MAX_PAGES = 4
NUM_CODES = 3 * MAX_PAGES * 3 ** (MAX_PAGES * PAGE_SIZE)


def sequence(code: int) -> tuple[str, list[int]]:
    """A (namespace, tokens) from one integer (one cheap draw per sequence): 1..4 pages of tokens in 0..2."""
    ns = "b" if code % 3 == 2 else "a"
    code //= 3
    num_tokens = (1 + code % MAX_PAGES) * PAGE_SIZE
    code //= MAX_PAGES
    return ns, [code // 3**i % 3 for i in range(num_tokens)]


batches = st.lists(st.integers(0, NUM_CODES - 1).map(sequence), min_size=1, max_size=3)
actors = st.integers(0, 1)


class LocalActor:
    """Actor 0: the store of this process, behind the worker's call interface."""

    def __init__(self, store: HostPageStore) -> None:
        self.store, self.holder = store, store.holder
        self.reservations, self.ids = {}, itertools.count(1)

    def call(self, op, *args):
        store = self.store
        if op == "allocate":
            reservation = store.allocate_batch(args[0])
            if reservation is None:
                return None
            write_reserved(store, reservation, args[0])
            rid = next(self.ids)
            self.reservations[rid] = reservation
            return rid, reservation.new, reservation.held
        if op in ("commit", "abort"):
            return getattr(store, op)(self.reservations.pop(args[0]))
        if op == "match":
            return store.match(*args, hold=True)
        if op == "release":
            return store.release(args[0])
        return store.evict(args[0])


class HostStoreMachine(RuleBasedStateMachine):
    num_steps = 0
    events = Counter()

    def __init__(self) -> None:
        super().__init__()
        self.name = f"rgprop{os.getpid()}x{next(names)}"
        self.store = HostPageStore.create(self.name, NUM_PAGES, PAGE_SIZE, PAGE_BYTES, max_holders=4)
        self.layout = self.store.layout
        self.actors = [LocalActor(self.store), Worker(self.name)]
        self.matches = [[], []]  # per actor: slot lists returned by match (each released whole)
        self.open = [{}, {}]  # per actor: reservation id -> (new slots, held slots)
        self.seen = []  # (namespace, tokens) of allocated sequences: matches mostly ask for their prefixes
        self.committed = []  # of those, the ones committed: most matches ask for these, so hits are common
        self.batch_of = [{}, {}]  # per actor: reservation id -> the sequences it allocated

    def step(self) -> None:
        HostStoreMachine.num_steps += 1

    def snapshot(self) -> dict:
        return {name: getattr(self.layout, name).copy() for name in SNAPSHOT}

    def room_needed_and_found(self, seqs) -> tuple[int, int]:
        """(distinct pages of the batch the index lacks, free + evictable slots once the batch holds its matches)."""
        missing, matched = set(), set()
        for ns, tokens in seqs:
            pages = self.store._pages_of(tokens)
            slots, _ = self.store._walk(ns, pages)
            matched.update(slots)
            for i in range(len(slots), len(pages)):
                missing.add((ns, tuple(tokens[: (i + 1) * PAGE_SIZE])))
        layout = self.layout
        evictable = set(np.flatnonzero((layout.state == COMMITTED) & (layout.refcount == 0)).tolist()) - matched
        return len(missing), int(np.count_nonzero(layout.state == FREE)) + len(evictable)

    # ----- rules -----
    @rule(actor=actors, seqs=batches)
    def allocate(self, actor, seqs):
        self.step()
        self.store.sweep()
        before = self.snapshot()
        needed, room = self.room_needed_and_found(seqs)
        result = self.actors[actor].call("allocate", seqs)
        if result is None:
            HostStoreMachine.events["rollback"] += 1
            assert all(np.array_equal(before[n], getattr(self.layout, n)) for n in SNAPSHOT), "rollback left a trace"
            assert needed > room, "an allocation that fitted was refused"
            return
        assert needed <= room
        rid, new, held = result
        self.open[actor][rid] = (new, held)
        self.batch_of[actor][rid] = seqs
        self.seen.extend(seqs)
        HostStoreMachine.events["allocated"] += 1
        assert all(self.layout.owner[s] == self.actors[actor].holder for s in new)

    @precondition(lambda self: self.open[0] or self.open[1])
    @rule(actor=actors, index=st.integers(0, 10), is_commit=st.booleans())
    def finish(self, actor, index, is_commit):
        self.step()
        if not self.open[actor]:
            actor = 1 - actor
        rid = sorted(self.open[actor])[index % len(self.open[actor])]
        new, _ = self.open[actor].pop(rid)
        seqs = self.batch_of[actor].pop(rid)
        self.actors[actor].call("commit" if is_commit else "abort", rid)
        if is_commit:
            self.committed.extend(seqs)
        else:
            HostStoreMachine.events["abort"] += 1
            assert all(self.layout.state[s] == FREE for s in new), "an aborted page is still taken"

    @rule(actor=actors, pick=st.integers(0, 10**6), code=st.integers(0, NUM_CODES - 1))
    def match(self, actor, pick, code):
        """Mostly a prefix of a sequence committed (half) or allocated (a quarter) before, with a random
        tail; else a random one."""
        self.step()
        ns, tokens = sequence(code)
        known = self.committed if pick % 4 in (1, 2) and self.committed else self.seen
        if known and pick % 4:
            ns, seen = known[pick % len(known)]
            tokens = seen[: PAGE_SIZE * (pick % 5)] + tokens[:PAGE_SIZE]
        slots = self.actors[actor].call("match", ns, tokens)
        self.matches[actor].append(slots)
        for i, slot in enumerate(slots):  # the page holds what was written for exactly this prefix
            expected = fill_byte(ns, tuple(tokens[: (i + 1) * PAGE_SIZE]))
            assert (self.store.page(slot) == expected).all(), "a matched page holds another prefix's bytes"
        HostStoreMachine.events["hit" if slots else "miss"] += 1

    @precondition(lambda self: self.matches[0] or self.matches[1])
    @rule(actor=actors, index=st.integers(0, 10))
    def release(self, actor, index):
        self.step()
        if not self.matches[actor]:
            actor = 1 - actor
        slots = self.matches[actor].pop(index % len(self.matches[actor]))
        self.actors[actor].call("release", slots)

    @rule(actor=actors, num_pages=st.integers(1, NUM_PAGES))
    def evict(self, actor, num_pages):
        self.step()
        HostStoreMachine.events["evicted"] += self.actors[actor].call("evict", num_pages)

    @precondition(lambda self: self.matches[1] or self.open[1])
    @rule(coin=st.integers(0, 2))
    def kill_worker(self, coin):
        """SIGKILL the worker while it holds things; the sweep gives them all back."""
        self.step()
        if coin:  # a kill (and the fork of a new worker) on a third of the draws
            return
        worker = self.actors[1]
        worker.kill()
        self.store.sweep()
        assert not self.layout.holder_refs[worker.holder].any(), "a dead holder's references survived the sweep"
        assert not ((self.layout.state == RESERVED) & (self.layout.owner == worker.holder)).any()
        self.matches[1], self.open[1], self.batch_of[1] = [], {}, {}
        self.actors[1] = Worker(self.name)
        HostStoreMachine.events["killed"] += 1

    # ----- invariants -----
    @invariant()
    def every_page_is_in_exactly_one_place(self):
        layout = self.layout
        committed = set(np.flatnonzero(layout.state == COMMITTED).tolist())
        table = layout.table[layout.table >= 0].tolist()
        assert len(table) == len(set(table)) and set(table) == committed
        reserved = [s for actor in (0, 1) for new, _ in self.open[actor].values() for s in new]
        assert len(reserved) == len(set(reserved)), "a page is in two reservations"
        assert set(reserved) == set(np.flatnonzero(layout.state == RESERVED).tolist())
        assert len(committed) + len(reserved) + int(np.count_nonzero(layout.state == FREE)) == NUM_PAGES

    @invariant()
    def references_agree_with_the_model(self):
        layout = self.layout
        assert (layout.refcount >= 0).all() and np.array_equal(layout.refcount, layout.holder_refs.sum(axis=0))
        for actor in (0, 1):
            held = Counter(s for slots in self.matches[actor] for s in slots)
            held.update(s for _, h in self.open[actor].values() for s in h)
            row = layout.holder_refs[self.actors[actor].holder]
            assert {s: int(row[s]) for s in np.flatnonzero(row).tolist()} == dict(held)
            assert all(layout.state[s] == COMMITTED for s in held), "a referenced page was evicted"

    @invariant()
    def the_tree_is_consistent(self):
        layout = self.layout
        committed = np.flatnonzero(layout.state == COMMITTED)
        parents = layout.parent[committed]
        assert all(p == -1 or layout.state[p] == COMMITTED for p in parents.tolist()), "an orphan page"
        counts = Counter(p for p in parents.tolist() if p >= 0)
        assert all(int(layout.children[s]) == counts.get(s, 0) for s in committed.tolist())

    def teardown(self):
        if hasattr(self, "actors"):
            self.actors[1].stop()
            self.store.close()


def test_host_store_agrees_with_model_across_two_processes_over_2000_steps():
    HostStoreMachine.num_steps = 0
    HostStoreMachine.events.clear()
    run_state_machine_as_test(
        HostStoreMachine,
        settings=settings(max_examples=56, stateful_step_count=55, deadline=None, database=None,
                          derandomize=True, suppress_health_check=list(HealthCheck)),
    )
    assert HostStoreMachine.num_steps >= MIN_STEPS, HostStoreMachine.num_steps
    events = HostStoreMachine.events
    assert all(events[name] >= 5 for name in ("rollback", "abort", "hit", "miss", "evicted", "killed", "allocated")), events
