"""HostPageStore contracts on small, hand-built cases (the property test covers the random mix)."""

import os

import numpy as np
import pytest

from engine.host_tier import HostPageStore, LeaseExpiredError
from engine.host_tier.layout import COMMITTED, FREE


@pytest.fixture
def store():
    created = HostPageStore.create(f"rgunit{os.getpid()}", 6, 2, 4)
    yield created
    created.close()


def commit(store, seqs):
    reservation = store.allocate_batch(seqs)
    assert reservation is not None
    store.commit(reservation)
    return reservation


def test_a_batch_shares_one_slot_per_page_and_matches_per_namespace(store):
    reservation = commit(store, [("a", [1, 2, 3, 4]), ("a", [1, 2, 5, 6])])
    assert len(reservation.new) == 3  # [1, 2] is one page for both sequences
    assert len(store.match("a", [1, 2, 3, 4, 9], hold=False)) == 2
    assert store.match("b", [1, 2, 3, 4], hold=False) == []  # another namespace (tenant salt) sees nothing


def test_a_batch_too_big_for_the_store_takes_nothing(store):
    commit(store, [("a", [1, 2, 3, 4])])
    before = store.layout.state.copy(), store.layout.refcount.copy(), store.layout.table.copy()
    # 1 + 5 new pages > 4 free + 1 evictable ([1, 2] is held by the batch itself)
    assert store.allocate_batch([("a", [1, 2, 7, 7]), ("b", list(range(10)))]) is None
    after = store.layout.state, store.layout.refcount, store.layout.table
    assert all(np.array_equal(x, y) for x, y in zip(before, after))


def test_allocation_evicts_lru_unreferenced_leaves_and_spares_held_paths(store):
    commit(store, [("a", [1, 1, 1, 1])])
    commit(store, [("a", [2, 2, 2, 2])])
    held = store.match("a", [1, 1, 1, 1])  # the older path, referenced
    commit(store, [("a", [3, 3, 3, 3])])
    commit(store, [("b", [4, 4, 4, 4, 4, 4])])  # 3 pages: path 2 whole (least recent), then path 3's leaf
    assert store.match("a", [2, 2, 2, 2], hold=False) == []
    assert len(store.match("a", [1, 1, 1, 1], hold=False)) == 2  # held: never evicted
    assert len(store.match("a", [3, 3, 3, 3], hold=False)) == 1
    assert store.allocate_batch([("c", list(range(10)))]) is None  # 5 new > 0 free + 4 evictable
    store.release(held)
    assert not store.layout.refcount.any()


def test_two_processes_committing_the_same_page_converge_on_one_slot(store):
    other = HostPageStore.attach(store.name, untrack=False)
    try:
        mine, theirs = store.allocate_batch([("a", [1, 2, 3, 4])]), other.allocate_batch([("a", [1, 2, 3, 4])])
        assert set(mine.new).isdisjoint(theirs.new)
        store.commit(mine)
        assert other.commit(theirs) == 0  # the first commit won; the duplicates went back
        assert int(np.count_nonzero(store.layout.state == COMMITTED)) == 2
        assert int(np.count_nonzero(store.layout.state == FREE)) == 4
    finally:
        other.close()


def test_an_expired_lease_gives_references_back_and_the_holder_re_registers(store):
    other = HostPageStore.attach(store.name, untrack=False)
    try:
        commit(store, [("a", [1, 2, 3, 4])])
        held = other.match("a", [1, 2, 3, 4])
        pending = other.allocate_batch([("a", [1, 2, 3, 4, 5, 6])])
        store.layout.holder_expiry[other.holder] = 0.0  # it stopped renewing
        assert store.sweep() == 3  # two references on the path, one reserved page
        assert not store.layout.refcount.any() and int(np.count_nonzero(store.layout.state == FREE)) == 4
        other.release(held)  # a no-op: the sweep gave them back already
        with pytest.raises(LeaseExpiredError):
            other.commit(pending)
        assert len(other.match("a", [1, 2, 3, 4], hold=False)) == 2  # registered again, works on
    finally:
        other.close()
