"""The host page store's shared-memory layout: one metadata segment, one data segment.

Every process that attaches sees the same numpy views over the same bytes, so
the index, reference counts and holder leases are shared state; only the
cross-process lock (engine.host_tier.lock) makes changing them safe.

Metadata, per page slot s (num_pages slots):
    state[s]        FREE, RESERVED (taken by an allocation not yet committed) or COMMITTED (in the index)
    key[s]          chained hash of (namespace, tokens of every page from the root through s)
    ns_hash[s]      hash of the namespace (tenant cache domain / salt included in the name)
    parent[s]       slot of the previous page of the prefix, -1 for a first page
    tokens[s, :]    the page's token ids (an index hit is verified on them, not on the hash)
    children[s]     committed pages whose parent is s (only childless pages are evicted)
    refcount[s]     sum over holders of holder_refs[:, s]
    last_access[s]  the store's logical clock at the last match/commit through s
    owner[s]        holder index of a RESERVED slot, -1 otherwise
    holder_refs[h, s]  references holder h holds on s (a dead holder's row is swept back)
Holders (max_holders rows): pid, generation (bumped on every (re)use), lease expiry (unix time).
table: open-addressing hash table (linear probing) of committed slots by key; -1 = empty.
"""

from __future__ import annotations

from multiprocessing import resource_tracker, shared_memory

import numpy as np

MAGIC = 0x52474854  # "RGHT"
FREE, RESERVED, COMMITTED = 0, 1, 2
HEADER_FIELDS = ("magic", "num_pages", "page_size", "page_bytes", "max_holders", "table_size",
                 "clock", "num_evicted", "num_committed")


def table_size_for(num_pages: int) -> int:
    """Smallest power of two >= 2 * num_pages: the table stays at most half full."""
    size = 1
    while size < 2 * num_pages:
        size <<= 1
    return size


def _columns(num_pages: int, page_size: int, max_holders: int, table_size: int) -> list[tuple[str, type, tuple]]:
    return [
        ("header", np.int64, (len(HEADER_FIELDS),)),
        ("key", np.uint64, (num_pages,)),
        ("ns_hash", np.uint64, (num_pages,)),
        ("last_access", np.int64, (num_pages,)),
        ("holder_pid", np.int64, (max_holders,)),
        ("holder_generation", np.int64, (max_holders,)),
        ("holder_expiry", np.float64, (max_holders,)),
        ("tokens", np.int32, (num_pages, page_size)),
        ("parent", np.int32, (num_pages,)),
        ("children", np.int32, (num_pages,)),
        ("refcount", np.int32, (num_pages,)),
        ("holder_refs", np.int32, (max_holders, num_pages)),
        ("table", np.int32, (table_size,)),
        ("owner", np.int16, (num_pages,)),
        ("state", np.int8, (num_pages,)),
    ]


def meta_bytes(num_pages: int, page_size: int, max_holders: int) -> int:
    cols = _columns(num_pages, page_size, max_holders, table_size_for(num_pages))
    return sum(int(np.prod(shape)) * np.dtype(dtype).itemsize for _, dtype, shape in cols)


class Layout:
    """Named numpy views over a metadata segment (attribute per column) and the page data."""

    def __init__(self, meta: shared_memory.SharedMemory, data: shared_memory.SharedMemory,
                 num_pages: int, page_size: int, page_bytes: int, max_holders: int) -> None:
        self.meta, self.data = meta, data
        offset = 0
        self.names = []
        for name, dtype, shape in _columns(num_pages, page_size, max_holders, table_size_for(num_pages)):
            count = int(np.prod(shape))
            view = np.ndarray(shape, dtype=dtype, buffer=meta.buf, offset=offset)
            setattr(self, name, view)
            self.names.append(name)
            offset += count * np.dtype(dtype).itemsize
        self.pages = np.ndarray((num_pages, page_bytes), dtype=np.uint8, buffer=data.buf)  # (num_pages, page_bytes)

    def field(self, name: str) -> int:
        return int(self.header[HEADER_FIELDS.index(name)])

    def set_field(self, name: str, value: int) -> None:
        self.header[HEADER_FIELDS.index(name)] = value

    def add_field(self, name: str, delta: int) -> int:
        i = HEADER_FIELDS.index(name)
        self.header[i] += delta
        return int(self.header[i])

    def release(self) -> None:
        """Drop every view (a segment cannot close while views export its buffer)."""
        for name in self.names:
            setattr(self, name, None)
        self.pages = None


def create_segments(name: str, num_pages: int, page_size: int, page_bytes: int, max_holders: int) -> Layout:
    meta = shared_memory.SharedMemory(f"{name}-meta", create=True, size=meta_bytes(num_pages, page_size, max_holders))
    try:
        data = shared_memory.SharedMemory(f"{name}-data", create=True, size=max(1, num_pages * page_bytes))
    except BaseException:
        meta.close()
        meta.unlink()
        raise
    layout = Layout(meta, data, num_pages, page_size, page_bytes, max_holders)
    layout.header[:] = [MAGIC, num_pages, page_size, page_bytes, max_holders, table_size_for(num_pages), 0, 0, 0]
    layout.parent[:] = -1
    layout.owner[:] = -1
    layout.table[:] = -1
    layout.holder_pid[:] = 0
    return layout


def attach_segments(name: str, *, untrack: bool = True) -> Layout:
    """Map an existing store; the attaching process does not unlink it at exit (only the creator does)."""
    meta = shared_memory.SharedMemory(f"{name}-meta")
    if untrack:
        _untrack(meta)
    header = np.ndarray((len(HEADER_FIELDS),), dtype=np.int64, buffer=meta.buf)
    if int(header[0]) != MAGIC:
        del header
        meta.close()
        raise ValueError(f"shared memory {name!r}-meta is not a radixgate host page store")
    num_pages, page_size, page_bytes, max_holders = (int(v) for v in header[1:5])
    del header
    data = shared_memory.SharedMemory(f"{name}-data")
    if untrack:
        _untrack(data)
    return Layout(meta, data, num_pages, page_size, page_bytes, max_holders)


def untrack_segments(layout: Layout) -> None:
    _untrack(layout.meta)
    _untrack(layout.data)


def _untrack(segment: shared_memory.SharedMemory) -> None:
    # Before Python 3.13 attaching registers the segment with this process's resource
    # tracker, which would unlink it when this process exits, under the other processes.
    try:
        resource_tracker.unregister(segment._name, "shared_memory")  # noqa: SLF001
    except Exception:  # noqa: BLE001 - a tracker that never heard of it is fine
        pass
