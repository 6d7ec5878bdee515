"""KVBlockIndex: exactly which token blocks one node holds, per cache domain, from its KV events.

A node (vLLM, SGLang, or a radixgate node: engine/kv_events.py) publishes BlockStored (its block
hashes, each chained to its parent, with the blocks' token ids and, on a chain's first block, the
cache salt in `extra_keys`), BlockRemoved (hashes) and AllBlocksCleared. The node's hash function
is its own business (vLLM's is sha256 of CBOR, or xxhash seeded per process, by version), so the
index never recomputes it: it keys every block by the edge's own chain key,

    key(block 0) = blake2b(domain + tokens of block 0),  key(block i) = blake2b(key(block i-1) + tokens of block i)

(domain: the request's cache salt, "" without one; tokens as int32), found for a stored block
from its parent's key and its own token ids, and remembers node hash -> key to apply removals.
A request's cached prefix on the node is then the run of its own blocks' keys present in the index,
from the first block: exactly the blocks the node would reuse, whatever hash it uses.

Invariants: the index holds only blocks whose BlockStored it applied and whose BlockRemoved or
AllBlocksCleared it has not: after `clear` it is empty, so a subscriber that doubts its stream
(routing/kv_subscriber.py) clears it and the index under-, never over-states what the node holds.
A BlockStored whose parent is unknown (stored before the last clear) is skipped, for the same
reason. Blocks of another medium than the device's ("CPU" offload) are not counted.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence
from typing import Any

import msgspec

DEVICE_MEDIA = (None, "GPU")


class KVBlockIndex:
    """One node's cached blocks. Event-loop only (no locking)."""

    def __init__(self, name: str, block_size: int | None = None) -> None:
        self.name = name
        self.block_size = block_size  # learned from the first BlockStored when not configured
        self._key_of: dict[Any, bytes] = {}  # node's block hash -> our chain key
        self._count: dict[bytes, int] = {}  # our chain key -> node blocks holding it
        self.num_stored = self.num_removed = self.num_cleared = self.num_orphans = 0

    @property
    def num_blocks(self) -> int:
        return len(self._key_of)

    def clear(self) -> None:
        self._key_of.clear()
        self._count.clear()
        self.num_cleared += 1

    def apply(self, events: Sequence[dict]) -> None:
        """Apply one batch's events (decoded maps, see `decode_batch`) in order."""
        for event in events:
            kind = event.get("type")
            if kind == "BlockStored":
                self._stored(event)
            elif kind == "BlockRemoved":
                if event.get("medium") in DEVICE_MEDIA:
                    for block_hash in event.get("block_hashes") or ():
                        self._remove(as_key(block_hash))
            elif kind == "AllBlocksCleared":
                self.clear()

    def _stored(self, event: dict) -> None:
        if event.get("medium") not in DEVICE_MEDIA:
            return
        hashes = [as_key(h) for h in event.get("block_hashes") or ()]
        tokens = event.get("token_ids") or ()
        size = int(event.get("block_size") or self.block_size or 0)
        if not hashes or size <= 0 or len(tokens) < size * len(hashes):
            return
        self.block_size = self.block_size or size
        if size != self.block_size:
            return
        parent = event.get("parent_block_hash")
        if parent is None:
            extra = event.get("extra_keys") or [None]
            key = root_key(salt_from_extra(extra[0] if extra else None))
        else:
            key = self._key_of.get(as_key(parent))
            if key is None:
                self.num_orphans += 1
                return
        for i, block_hash in enumerate(hashes):
            key = next_key(key, tokens[i * size:(i + 1) * size])
            if block_hash in self._key_of:
                continue
            self._key_of[block_hash] = key
            self._count[key] = self._count.get(key, 0) + 1
            self.num_stored += 1

    def _remove(self, block_hash: Any) -> None:
        key = self._key_of.pop(block_hash, None)
        if key is None:
            return
        self.num_removed += 1
        left = self._count.get(key, 0) - 1
        if left > 0:
            self._count[key] = left
        else:
            self._count.pop(key, None)

    def match(self, keys: Sequence[bytes]) -> int:
        """Leading blocks of `keys` (a request's chain keys, see `request_keys`) this node holds."""
        count = self._count
        n = 0
        for key in keys:
            if key not in count:
                break
            n += 1
        return n

    def cached_tokens(self, domain: str | None, token_ids: Sequence[int], keys_cache: dict | None = None) -> int:
        """Tokens of `token_ids` (in cache domain `domain`) this node holds, page-aligned from the start."""
        if not self.block_size or not self._count:
            return 0
        cache_key = (domain, self.block_size)
        keys = keys_cache.get(cache_key) if keys_cache is not None else None
        if keys is None:
            keys = request_keys(domain, token_ids, self.block_size)
            if keys_cache is not None:
                keys_cache[cache_key] = keys
        return self.match(keys) * self.block_size

    def describe(self) -> dict:
        return {"blocks": self.num_blocks, "block_size": self.block_size, "stored": self.num_stored,
                "removed": self.num_removed, "cleared": self.num_cleared, "orphans": self.num_orphans}


def as_key(block_hash: Any) -> Any:
    """A node's block hash as a dict key (msgpack gives ints, bytes, or lists for tuples)."""
    return tuple(block_hash) if isinstance(block_hash, list) else block_hash


def salt_from_extra(extra: Any) -> str | None:
    """The cache salt among a first block's extra keys (vLLM: LoRA name, MM hashes, then the salt)."""
    if not extra:
        return None
    strings = [item for item in extra if isinstance(item, str)]
    return strings[-1] if strings else None


def root_key(domain: str | None) -> bytes:
    return hashlib.blake2b((domain or "").encode(), digest_size=16).digest()


def next_key(parent: bytes, tokens: Sequence[int]) -> bytes:
    return hashlib.blake2b(parent + array("i", tokens).tobytes(), digest_size=16).digest()


def request_keys(domain: str | None, token_ids: Sequence[int], block_size: int) -> list[bytes]:
    """The chain keys of every whole block of `token_ids` in `domain`."""
    keys, key = [], root_key(domain)
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        key = next_key(key, token_ids[start:start + block_size])
        keys.append(key)
    return keys


def decode_batch(payload: bytes) -> tuple[float | None, list[dict]]:
    """(ts, events as maps with "type") from one msgpack KVEventBatch in any of vLLM's encodings:
    the batch as an array [ts, events, dp_rank?] or a map; each event a map tagged "type" or an array
    ["BlockStored", ...fields in declaration order]. Raises ValueError on anything else."""
    try:
        batch = msgspec.msgpack.decode(payload)
    except msgspec.DecodeError as exc:
        raise ValueError(f"not msgpack: {exc}") from exc
    if isinstance(batch, dict):
        ts, events = batch.get("ts"), batch.get("events")
    elif isinstance(batch, list) and len(batch) >= 2:
        ts, events = batch[0], batch[1]
    else:
        raise ValueError("not a KV event batch")
    if not isinstance(events, list):
        raise ValueError("a KV event batch without an event list")
    return ts, [normalize_event(event) for event in events]


ARRAY_FIELDS = {
    "BlockStored": ("block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name",
                    "extra_keys"),
    "BlockRemoved": ("block_hashes", "medium"),
    "AllBlocksCleared": (),
}


def normalize_event(event: Any) -> dict:
    if isinstance(event, dict):
        if "type" not in event:
            raise ValueError("a KV event without a type")
        return event
    if isinstance(event, list) and event and event[0] in ARRAY_FIELDS:
        fields = ARRAY_FIELDS[event[0]]
        return {"type": event[0], **dict(zip(fields, event[1:]))}
    raise ValueError("not a KV event")
