"""HostTier: the engine's side of the host page store — copies between KV pool pages and host slots.

A host slot holds one KV-pool page for every layer, laid out as
(num_layers, 2 [K, V], page_size, num_kv_heads, head_dim) in the pool's dtype,
so a copy in either direction is exact (bitwise): a prefix loaded from the host
gives the same attention inputs as the one that was computed.

  * write(items): write-back / write-through of several (namespace, tokens,
    device pages) sequences in one all-or-nothing host allocation; pages the
    host already holds are not copied again. A full host tier (everything
    referenced) drops the write and counts it, it never blocks the engine.
  * hold(namespace, tokens) -> slots of the longest host prefix, referenced
    until release(slots); load(slots, device_pages) copies them into the pool.
"""

from __future__ import annotations

import logging
import os
import time
import uuid

import torch

from engine.host_tier.copy_policy import CopyPolicy
from engine.host_tier.holders import LeaseExpiredError
from engine.host_tier.store import HostPageStore

logger = logging.getLogger(__name__)


def page_bytes_of(pool) -> int:
    k = pool.k_cache[0]
    return len(pool.k_cache) * 2 * pool.page_size * k.shape[1] * k.shape[2] * k.element_size()


def open_store(name: str | None, num_pages: int, page_size: int, page_bytes: int, lease_s: float) -> HostPageStore:
    """Attach to the store called name if it exists (it must have this shape), else create it."""
    if name is None:
        name = f"radixgate-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        store = HostPageStore.attach(name, lease_s=lease_s)
    except FileNotFoundError:
        return HostPageStore.create(name, num_pages, page_size, page_bytes, lease_s=lease_s)
    if (store.page_size, store.page_bytes) != (page_size, page_bytes):
        store.close()
        raise ValueError(f"host store {name!r} holds pages of {store.page_size} tokens / {store.page_bytes} bytes; "
                         f"this engine's pages are {page_size} tokens / {page_bytes} bytes")
    return store


class HostTier:
    def __init__(self, pool, store: HostPageStore) -> None:
        self.pool = pool
        self.store = store
        self.page_size = pool.page_size
        k = pool.k_cache[0]
        self._shape = (len(pool.k_cache), 2, pool.page_size, k.shape[1], k.shape[2])
        flat = torch.from_numpy(store.layout.pages)  # (num_slots, page_bytes) uint8, shared memory
        self._host = flat.view(k.dtype).view(store.num_pages, *self._shape)  # (slots, L, 2, P, H, D)
        self.policy = CopyPolicy(pool.page_size)
        self.num_hit_tokens = 0
        self.num_loads = 0
        self.num_loaded_pages = 0
        self.num_written_pages = 0
        self.num_dropped_writes = 0
        self.bytes_copied = 0
        self.copy_s = 0.0

    @classmethod
    def open(cls, pool, *, name: str | None, num_pages: int, lease_s: float = 60.0) -> "HostTier":
        return cls(pool, open_store(name, num_pages, pool.page_size, page_bytes_of(pool), lease_s))

    def close(self) -> None:
        self._host = None
        self.store.close()

    def _device_view(self, layer: int, kind: int) -> torch.Tensor:
        cache = (self.pool.k_cache if kind == 0 else self.pool.v_cache)[layer]
        return cache.view(self.pool.num_pages, self.page_size, *cache.shape[1:])  # (pages, P, H, D)

    # ----- device -> host -----
    def write(self, items: list[tuple[object, list[int] | bytes, list[int]]]) -> int:
        """Copy every sequence's pages the host lacks into it; returns pages written (0 if it is full)."""
        seqs = [(ns, tokens) for ns, tokens, _ in items]
        reservation = self.store.allocate_batch(seqs)
        if reservation is None:
            self.num_dropped_writes += 1
            return 0
        started = time.perf_counter()
        try:
            slots, pages = [], []
            for (_, _, device_pages), writes in zip(items, reservation.writes):
                if isinstance(device_pages, bytes):
                    device_pages = memoryview(device_pages).cast("i").tolist()
                for page_index, slot in writes:
                    slots.append(slot)
                    pages.append(device_pages[page_index])
            unique = dict(zip(slots, pages))  # a page shared by two sequences is one slot
            if unique:
                self._copy_out(list(unique), list(unique.values()))
        except BaseException:
            if reservation.generation == self.store.generation:
                self.store.abort(reservation)
            raise
        try:
            self.store.commit(reservation)
        except LeaseExpiredError:  # swept while copying (a stalled process): the pages were given back
            self.num_dropped_writes += 1
            return 0
        self._count_copy(len(unique), started)
        self.num_written_pages += len(unique)
        return len(unique)

    def _copy_out(self, slots: list[int], pages: list[int]) -> None:
        index = torch.tensor(pages, dtype=torch.long, device=self.pool.k_cache[0].device)
        parts = [self._device_view(layer, kind)[index] for layer in range(self._shape[0]) for kind in (0, 1)]
        block = torch.stack(parts, 1).view(len(pages), *self._shape)  # (n, L, 2, P, H, D)
        self._host[torch.tensor(slots, dtype=torch.long)] = block.cpu()

    # ----- host -> device -----
    def hold(self, namespace, tokens) -> list[int]:
        return self.store.match(namespace, tokens, hold=True)

    def release(self, slots: list[int]) -> None:
        self.store.release(slots)

    def load(self, slots: list[int], device_pages: list[int]) -> None:
        """Copy host slots into device pages, slot i into page i."""
        started = time.perf_counter()
        block = self._host[torch.tensor(slots, dtype=torch.long)]  # (n, L, 2, P, H, D)
        block = block.to(self.pool.k_cache[0].device, non_blocking=True)
        index = torch.tensor(device_pages, dtype=torch.long, device=block.device)
        for layer in range(self._shape[0]):
            for kind in (0, 1):
                self._device_view(layer, kind)[index] = block[:, layer, kind]
        seconds = self._count_copy(len(slots), started)
        self.policy.observe_copy(len(slots), seconds)
        self.num_loads += 1
        self.num_loaded_pages += len(slots)
        self.num_hit_tokens += len(slots) * self.page_size

    def _count_copy(self, num_pages: int, started: float) -> float:
        if self.pool.k_cache[0].is_cuda:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - started
        self.copy_s += seconds
        self.bytes_copied += num_pages * self.store.page_bytes
        return seconds

    def stats(self) -> dict:
        return {
            **self.store.stats(),
            "name": self.store.name,
            "hit_tokens": self.num_hit_tokens,
            "loads": self.num_loads,
            "loaded_pages": self.num_loaded_pages,
            "written_pages": self.num_written_pages,
            "dropped_writes": self.num_dropped_writes,
            "bytes_copied": self.bytes_copied,
            "copy_s": round(self.copy_s, 6),
            "policy": self.policy.stats(),
        }
