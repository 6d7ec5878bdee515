"""Recorded vLLM KV-event batches (tests/support/data/vllm_kv_events.msgpack), built to vLLM's exact wire format.

The structs below restate vllm/distributed/kv_events.py's (field names, order, tags; vLLM 0.1x-0.3x):
KVEventBatch is msgpack [ts, events, data_parallel_rank], each event a map tagged by "type", block
hashes sha256 digests (bytes, vLLM's default) chained by parent, the cache salt in the first block's
extra_keys. Regenerate with `python -m tests.support.vllm_kv_events` (deterministic). The file holds
msgpack [[seq, payload], ...]: the frames a subscriber receives, payload as sent on the wire.

What the batches do (block_size 4; domain "salt-x" unless said):
  seq 0  stored A0 A1 A2 (tokens 0..11, parent None, extra_keys [("salt-x",), None, None])
         stored B2 (tokens 100..103, parent A1): a branch
  seq 1  removed A2; stored C0 (tokens 0..3, no salt: another domain); stored D0 with medium "CPU"
  seq 2  AllBlocksCleared; stored E0 E1 (tokens 0..7, salt "salt-x")
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import msgspec

FIXTURE = Path(__file__).parent / "data" / "vllm_kv_events.msgpack"
BLOCK_SIZE = 4


class EventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


class BlockStored(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    block_hashes: list[bytes | int]
    parent_block_hash: bytes | int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None


class BlockRemoved(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    block_hashes: list[bytes | int]
    medium: str | None
    group_idx: int | None = None


class AllBlocksCleared(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    pass


def vhash(parent: bytes | None, tokens: list[int], extra: tuple | None) -> bytes:
    """A stand-in for vLLM's sha256 block hash (its exact input encoding does not matter to an indexer)."""
    return hashlib.sha256(repr((parent, tuple(tokens), extra)).encode()).digest()


def chain(parent: bytes | None, tokens: list[int], salt: str | None) -> list[bytes]:
    hashes = []
    for i in range(0, len(tokens), BLOCK_SIZE):
        extra = (salt,) if parent is None and salt else None
        parent = vhash(parent, tokens[i:i + BLOCK_SIZE], extra)
        hashes.append(parent)
    return hashes


def stored(hashes, parent, tokens, salt=None, medium="GPU") -> BlockStored:
    extra = [None] * len(hashes)
    if parent is None and salt:
        extra[0] = (salt,)
    return BlockStored(block_hashes=hashes, parent_block_hash=parent, token_ids=tokens, block_size=BLOCK_SIZE,
                       lora_id=None, medium=medium, lora_name=None, extra_keys=extra, group_idx=0,
                       kv_cache_spec_kind="full_attention")


def batches() -> list[EventBatch]:
    a = chain(None, list(range(12)), "salt-x")
    b2 = vhash(a[1], [100, 101, 102, 103], None)
    c0 = chain(None, [0, 1, 2, 3], None)
    d0 = chain(None, [7, 7, 7, 7], "salt-x")
    e = chain(None, list(range(8)), "salt-x")
    return [
        EventBatch(ts=1_700_000_000.0, events=[stored(a, None, list(range(12)), "salt-x"),
                                                stored([b2], a[1], [100, 101, 102, 103])], data_parallel_rank=0),
        EventBatch(ts=1_700_000_001.0, events=[BlockRemoved(block_hashes=[a[2]], medium="GPU", group_idx=0),
                                                stored(c0, None, [0, 1, 2, 3]),
                                                stored(d0, None, [7, 7, 7, 7], "salt-x", medium="CPU")],
                   data_parallel_rank=0),
        EventBatch(ts=1_700_000_002.0, events=[AllBlocksCleared(), stored(e, None, list(range(8)), "salt-x")],
                   data_parallel_rank=0),
    ]


def frames() -> list[tuple[int, bytes]]:
    """(seq, payload) of each recorded batch."""
    return [(seq, payload) for seq, payload in msgspec.msgpack.decode(FIXTURE.read_bytes())]


if __name__ == "__main__":
    encoder = msgspec.msgpack.Encoder()
    FIXTURE.write_bytes(encoder.encode([[seq, encoder.encode(batch)] for seq, batch in enumerate(batches())]))
    print(f"wrote {FIXTURE}")
