"""KVPool: all-or-nothing allocation, reference counts, free list, tensors."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import EngineError, OutOfPagesError
from engine.kv_pool import KVPool, page_ids_to_bytes


def test_allocate_gives_distinct_pages_with_one_reference():
    pool = KVPool(8, 4)
    pages = pool.allocate(5)
    assert len(set(pages)) == 5 and all(0 <= p < 8 for p in pages)
    assert all(pool.refcount(p) == 1 for p in pages)
    assert pool.num_free_pages == 3 and pool.num_referenced_pages == 5


def test_allocate_is_all_or_nothing():
    pool = KVPool(4, 1)
    pool.allocate(3)
    with pytest.raises(OutOfPagesError, match="asked for 2, 1 free of 4"):
        pool.allocate(2)
    assert pool.num_free_pages == 1
    assert pool.can_allocate(1) and not pool.can_allocate(2)


def test_allocate_zero_and_negative():
    pool = KVPool(2, 1)
    assert pool.allocate(0) == []
    with pytest.raises(ValueError):
        pool.allocate(-1)


def test_free_returns_pages_at_zero_references():
    pool = KVPool(4, 2)
    pages = pool.allocate(2)
    pool.ref(pages[:1])
    pool.free(pages)
    assert pool.refcount(pages[0]) == 1 and pool.refcount(pages[1]) == 0
    assert pool.num_free_pages == 3
    pool.free(pages[:1])
    assert pool.num_free_pages == 4
    assert sorted(pool.free_page_ids()) == [0, 1, 2, 3]


def test_freeing_a_free_page_raises_and_changes_nothing():
    pool = KVPool(4, 1)
    pages = pool.allocate(2)
    pool.free(pages[:1])
    with pytest.raises(EngineError, match="free page"):
        pool.free(pages)
    assert pool.refcount(pages[1]) == 1 and pool.num_free_pages == 3


def test_free_with_repeated_page_drops_one_reference_each_time():
    pool = KVPool(4, 1)
    (page,) = pool.allocate(1)
    pool.ref([page])
    pool.free([page, page])
    assert pool.refcount(page) == 0 and pool.num_free_pages == 4
    (page,) = pool.allocate(1)
    with pytest.raises(EngineError, match="below zero"):
        pool.free([page, page])
    assert pool.refcount(page) == 1


def test_ref_of_free_page_raises():
    pool = KVPool(2, 1)
    with pytest.raises(EngineError):
        pool.ref([0])


def test_out_of_range_page_raises():
    pool = KVPool(2, 1)
    with pytest.raises(EngineError, match="out of range"):
        pool.free([5])


def test_allocate_bytes_matches_allocate():
    pool = KVPool(8, 1)
    raw = pool.allocate_bytes(3)
    assert len(raw) == 12
    pool.free(raw)
    assert pool.num_free_pages == 8


@pytest.mark.parametrize("page_size", [0, 3, -2])
def test_page_size_must_be_power_of_two(page_size):
    with pytest.raises(ValueError):
        KVPool(4, page_size)


def test_tensor_pool_has_slot_indexed_tensors_per_layer():
    pool = KVPool(3, 4, num_layers=2, num_kv_heads=3, head_dim=8, dtype=torch.float16)
    assert len(pool.k_cache) == len(pool.v_cache) == 2
    assert pool.k_cache[0].shape == (12, 3, 8) and pool.k_cache[0].dtype == torch.float16
    assert pool.slots([2, 0]).tolist() == [8, 9, 10, 11, 0, 1, 2, 3]


def test_tensorless_pool_has_no_tensors():
    pool = KVPool(3, 4)
    assert pool.k_cache == [] and pool.v_cache == []


def test_allocations_mixing_fresh_and_freed_pages_keep_counts_exact():
    pool = KVPool(10, 1)
    first = pool.allocate(4)  # fresh range
    pool.free(first[1:3])
    mixed = pool.allocate(5)  # the 2 freed pages + 3 fresh ones
    assert len(set(first[:1] + first[3:] + mixed)) == 7
    assert all(pool.refcount(p) == 1 for p in first[:1] + first[3:] + mixed)
    assert sorted(pool.free_page_ids()) == sorted(set(range(10)) - set(first) - set(mixed))
    rest = pool.allocate(3)
    assert all(pool.refcount(p) == 1 for p in rest) and pool.num_free_pages == 0


def test_release_unique_frees_pages_and_counts_read_zero():
    pool = KVPool(6, 1)
    pages = pool.allocate_bytes(4)
    pool.release_unique(pages[:8])  # two pages back, counts reset lazily
    assert pool.num_free_pages == 4
    with pytest.raises(EngineError, match="free page"):
        pool.free(pages[:4])
    assert [pool.refcount(p) for p in memoryview(pages).cast("i")] == [0, 0, 1, 1]
    again = pool.allocate(3)
    assert all(pool.refcount(p) == 1 for p in again) and pool.num_free_pages == 1


def test_release_unique_keeps_pages_someone_else_holds():
    pool = KVPool(4, 1)
    pages = pool.allocate(2)
    pool.ref(pages[:1])
    pool.release_unique(page_ids_to_bytes(pages))
    assert pool.refcount(pages[0]) == 1 and pool.refcount(pages[1]) == 0 and pool.num_free_pages == 3


@settings(max_examples=60, deadline=None, database=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from(["allocate", "ref", "free", "release"]), st.integers(0, 6), st.integers(0, 99)),
                max_size=60))
def test_pool_counts_match_a_naive_model(ops):
    pool = KVPool(12, 1)
    model = {}  # page -> refcount (held pages only)
    for op, num, pick in ops:
        held = sorted(model)
        chosen = [held[(pick + i) % len(held)] for i in range(min(num, len(held)))] if held else []
        chosen = list(dict.fromkeys(chosen))
        if op == "allocate":
            if num > pool.num_free_pages:
                with pytest.raises(OutOfPagesError):
                    pool.allocate(num)
                continue
            model.update(dict.fromkeys(pool.allocate(num), 1))
        elif op == "ref":
            pool.ref(chosen)
            for p in chosen:
                model[p] += 1
        elif op == "free":
            pool.free(chosen)
        else:
            pool.release_unique(page_ids_to_bytes(chosen))
        if op in ("free", "release"):
            for p in chosen:
                model[p] -= 1
                if not model[p]:
                    del model[p]
        assert pool._num_shared == sum(c >= 2 for c in model.values())
        assert all(pool.refcount(p) == model.get(p, 0) for p in range(12))
        assert sorted(pool.free_page_ids()) == sorted(set(range(12)) - set(model))


def test_pages_come_out_as_ascending_runs_and_freed_ones_in_the_order_they_were_freed():
    """Long sequences get runs of consecutive slots (attention reads a run as a view, not a gather)."""
    pool = KVPool(64, 16)
    first, second = pool.allocate(10), pool.allocate(6)
    assert first == list(range(10)) and second == list(range(10, 16))
    pool.free(first)
    assert pool.allocate(10) == first
    pool.release_unique(page_ids_to_bytes(second))  # the radix cache's eviction path
    assert pool.allocate(6) == second
    pool.free(second[3:] + first[:4])
    assert pool.allocate(7) == second[3:] + first[:4]
