"""KVPool: paged K/V storage with a free list and per-page reference counts.

Layout: page p holds the K/V of `page_size` consecutive tokens in slots
[p * page_size, (p + 1) * page_size) of every layer's tensor.

Invariants (checked by the property test):
  * a page is either free (on the free list, refcount 0) or referenced
    (refcount >= 1), never both;
  * num_free_pages + num_referenced_pages == num_pages.

Ownership: allocate() hands the caller one reference per page; ref() adds one,
free() drops one, and a page returns to the free list when its count reaches 0.

The free list and counts live in flat int32 buffers so that allocating or
freeing a thousand pages costs a few C-level calls, not a Python loop; page
ids travel as `list[int]` on the public API and as int32 bytes on the fast
path the radix cache and the benchmark use (allocate_bytes / release_unique).
Two shortcuts keep that path cheap, both invisible to readers of counts:
  * pages never handed out sit at the bottom of the stack in order, so an
    allocation from there sets its counts as one range;
  * while no page is shared (refcount >= 2), release_unique() only pushes
    the ids: their counts keep reading 1 until allocate() hands them out
    again (which would set 1) or something reads counts (_flush sets 0).
"""

from __future__ import annotations

from array import array
from typing import Iterable

import numpy as np
import torch

from engine.errors import EngineError, OutOfPagesError


def page_ids_to_bytes(pages) -> bytes:
    """Page ids as native int32 bytes (accepts list, array, bytes, numpy, tensor)."""
    if isinstance(pages, bytes):
        return pages
    if isinstance(pages, (list, tuple, range)):
        return array("i", pages).tobytes()
    if isinstance(pages, array):
        return pages.tobytes() if pages.itemsize == 4 else array("i", pages).tobytes()
    if isinstance(pages, (bytearray, memoryview)):
        return bytes(pages)
    if isinstance(pages, torch.Tensor):
        pages = pages.detach().cpu().numpy()
    return np.ascontiguousarray(pages, dtype=np.int32).tobytes()


def _as_index(page_bytes: bytes) -> np.ndarray:
    """int32 page-id bytes as an intp index array (numpy's native index type: indexing converts nothing)."""
    return np.frombuffer(page_bytes, dtype=np.int32).astype(np.intp)


class KVPool:
    """Fixed-size pool of KV pages (tensor-less when num_layers == 0)."""

    def __init__(
        self,
        num_pages: int,
        page_size: int,
        *,
        num_layers: int = 0,
        num_kv_heads: int = 0,
        head_dim: int = 0,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
    ) -> None:
        if num_pages <= 0:
            raise ValueError(f"num_pages must be positive, got {num_pages}")
        if page_size <= 0 or page_size & (page_size - 1):
            raise ValueError(f"page_size must be a power of two (1 allowed), got {page_size}")
        self.page_size = page_size
        self.num_pages = num_pages
        # Free list as a stack of int32 ids; the top (end) holds the lowest ids.
        self._free_stack = bytearray(np.arange(num_pages - 1, -1, -1, dtype=np.int32).tobytes())
        # The bottom _num_untouched entries of the stack were never handed out:
        # entry j holds page num_pages - 1 - j (an allocation from there is a range).
        self._num_untouched = num_pages
        # Entries at or above _num_clean are free pages whose count still reads 1:
        # release_unique() leaves them so, since the next allocate() usually hands
        # them out again and would set 1 anyway. Every read of counts flushes first.
        self._num_clean = num_pages
        self._num_shared = 0  # pages with refcount >= 2 (none: release_unique reads no counts)
        # np.full, not np.zeros: the pages are touched now, not on first use in the hot path.
        self._refcounts = np.full(num_pages, 0, dtype=np.int32)  # (num_pages,)
        self._scratch = np.full(num_pages, 0, dtype=np.int32)  # duplicate detection in free()
        self.k_cache: list[torch.Tensor] = []
        self.v_cache: list[torch.Tensor] = []
        shape = (num_pages * page_size, num_kv_heads, head_dim)  # (num_slots, num_kv_heads, head_dim)
        for _ in range(num_layers):
            self.k_cache.append(torch.zeros(shape, dtype=dtype, device=device))
            self.v_cache.append(torch.zeros(shape, dtype=dtype, device=device))

    # ----- sizes -----
    @property
    def num_free_pages(self) -> int:
        return len(self._free_stack) >> 2

    @property
    def num_referenced_pages(self) -> int:
        return self.num_pages - self.num_free_pages

    def can_allocate(self, num_pages: int) -> bool:
        return 0 <= num_pages <= self.num_free_pages

    def refcount(self, page: int) -> int:
        self._check_ids(np.array([page]))
        self._flush()
        return int(self._refcounts[page])

    def _flush(self) -> None:
        """Zero the counts of free pages that still read 1 (see _num_clean)."""
        num_free = len(self._free_stack) >> 2
        if self._num_clean < num_free:
            with memoryview(self._free_stack) as stack:
                stale = stack[self._num_clean << 2 :].tobytes()
            self._refcounts[_as_index(stale)] = 0
            self._num_clean = num_free

    def free_page_ids(self) -> list[int]:
        """The free list, in no particular order (for checks and tests)."""
        return memoryview(self._free_stack).cast("i").tolist()

    # ----- allocate / free -----
    def allocate(self, num_pages: int) -> list[int]:
        """num_pages fresh pages, each with refcount 1; all or nothing."""
        return memoryview(self.allocate_bytes(num_pages)).cast("i").tolist()

    def allocate_bytes(self, num_pages: int) -> bytes:
        """Like allocate(), returning the page ids as native int32 bytes."""
        if num_pages < 0:
            raise ValueError(f"cannot allocate a negative number of pages ({num_pages})")
        num_free = self.num_free_pages
        if num_pages > num_free:
            raise OutOfPagesError(
                f"KV pool out of pages: asked for {num_pages}, {num_free} free of {self.num_pages} "
                f"(page_size {self.page_size}); evict or free pages first"
            )
        if num_pages == 0:
            return b""
        nbytes = num_pages << 2
        with memoryview(self._free_stack) as stack:
            out = stack[len(stack) - nbytes :].tobytes()  # one copy; the slice view dies here
        del self._free_stack[-nbytes:]
        remaining = num_free - num_pages
        if num_free == self._num_untouched:
            # Straight from the never-used bottom of the stack: ids form the
            # contiguous range [num_pages_total - num_free, ... + num_pages).
            first = self.num_pages - num_free
            self._refcounts[first : first + num_pages] = 1
        elif remaining < self._num_clean:  # some of the pages read 0: set them (stale ones read 1)
            self._refcounts[_as_index(out[: (self._num_clean - remaining) << 2])] = 1
        self._num_untouched = min(self._num_untouched, remaining)
        self._num_clean = min(self._num_clean, remaining)
        # in pop order (the top first): a fresh pool hands out 0, 1, 2, ... and pages freed together come
        # back in the order they were freed (_push_free), so a long sequence's slots tend
        # to form one ascending run, which attention reads as a view instead of gathering it
        return np.frombuffer(out, dtype=np.int32)[::-1].tobytes()

    def ref(self, pages: Iterable[int] | bytes) -> None:
        """Add one reference to each page (each must be allocated)."""
        ids = np.frombuffer(page_ids_to_bytes(pages), dtype=np.int32)
        self._check_ids(ids)
        self._flush()
        if not self._refcounts[ids].all():
            raise EngineError("ref() of a free page")
        uniq = np.unique(ids)
        before = np.count_nonzero(self._refcounts[uniq] >= 2)
        np.add.at(self._refcounts, ids, 1)
        self._num_shared += np.count_nonzero(self._refcounts[uniq] >= 2) - before

    def free(self, pages: Iterable[int] | bytes) -> None:
        """Drop one reference per listed page; pages reaching 0 return to the free list.

        Raises EngineError, changing nothing, if a page is free already (or
        would be dropped below zero by being listed more times than it is held).
        """
        ids = np.frombuffer(page_ids_to_bytes(pages), dtype=np.int32)
        if not len(ids):
            return
        self._check_ids(ids)
        self._flush()
        counts = self._refcounts
        old = counts[ids]
        if not old.all():
            raise EngineError(f"free() of a free page: {ids[old == 0][:8].tolist()}")
        order = np.arange(len(ids), dtype=np.int32)
        self._scratch[ids] = order
        if np.array_equal(self._scratch[ids], order):  # no page listed twice
            new = old - 1
            counts[ids] = new
            released = ids[new == 0]
            self._num_shared -= np.count_nonzero(old == 2)
        else:
            released = self._free_repeated(ids)
        self._push_free(released)
        self._num_clean = len(self._free_stack) >> 2

    def release_unique(self, page_bytes: bytes) -> None:
        """free() for a caller that holds one reference to each of these distinct pages.

        The radix cache's eviction path: its pages are distinct and referenced
        by construction (an invariant the property test checks), so the
        duplicate and range checks are skipped.
        """
        if not page_bytes:
            return
        if not self._num_shared:  # every allocated page reads 1: all of these become free
            self._push_free(np.frombuffer(page_bytes, dtype=np.int32))  # stale: counts read 1 until allocate/_flush
            return
        ids = _as_index(page_bytes)
        counts = self._refcounts.take(ids)
        if counts.max() == 1:  # none of these is shared
            self._push_free(np.frombuffer(page_bytes, dtype=np.int32))
        else:
            self._flush()
            self._num_shared -= np.count_nonzero(counts == 2)
            counts -= 1
            self._refcounts[ids] = counts
            self._push_free(ids[counts == 0].astype(np.int32))
            self._num_clean = len(self._free_stack) >> 2

    def _push_free(self, ids: np.ndarray) -> None:
        """Put int32 page ids on the free stack reversed, so that allocate() pops them in the order given."""
        self._free_stack += ids[::-1].tobytes()

    def _free_repeated(self, ids: np.ndarray) -> np.ndarray:
        uniq, times = np.unique(ids, return_counts=True)
        if (self._refcounts[uniq] < times).any():
            raise EngineError("free() drops a page below zero references")
        before = np.count_nonzero(self._refcounts[uniq] >= 2)
        self._refcounts[uniq] -= times.astype(np.int32)
        self._num_shared += np.count_nonzero(self._refcounts[uniq] >= 2) - before
        return uniq[self._refcounts[uniq] == 0]

    def _check_ids(self, ids: np.ndarray) -> None:
        if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= self.num_pages):
            raise EngineError(f"page id out of range [0, {self.num_pages})")

    def slots(self, pages: Iterable[int]) -> torch.Tensor:
        """KV slot index of every token in `pages`, in order: (len(pages) * page_size,) long."""
        base = torch.as_tensor(list(pages), dtype=torch.long).unsqueeze(1) * self.page_size
        return (base + torch.arange(self.page_size, dtype=torch.long)).reshape(-1)
