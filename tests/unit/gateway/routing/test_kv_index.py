"""The KV-event index on recorded vLLM batches (tests/support/vllm_kv_events.py): stored, removed and
cleared blocks, salts as cache domains, branches, other media, and every encoding vLLM has used."""

from __future__ import annotations

import msgspec
import pytest

from gateway.routing.kv_index import KVBlockIndex, decode_batch
from tests.support.vllm_kv_events import BLOCK_SIZE, frames


def replayed(upto: int) -> KVBlockIndex:
    index = KVBlockIndex("vllm0")
    for seq, payload in frames()[: upto + 1]:
        index.apply(decode_batch(payload)[1])
    return index


def test_stored_blocks_are_found_by_their_tokens_in_their_salt_only():
    index = replayed(0)
    assert index.block_size == BLOCK_SIZE
    assert index.cached_tokens("salt-x", list(range(12)) + [50, 51]) == 12
    assert index.cached_tokens("salt-x", list(range(8)) + [100, 101, 102, 103]) == 12  # the branch at A1
    assert index.cached_tokens("salt-x", list(range(6))) == 4  # whole blocks only
    assert index.cached_tokens("salt-y", list(range(12))) == 0
    assert index.cached_tokens(None, list(range(12))) == 0
    assert index.cached_tokens("salt-x", [1] + list(range(1, 12))) == 0


def test_removed_blocks_end_the_match_and_other_media_never_count():
    index = replayed(1)
    assert index.cached_tokens("salt-x", list(range(12))) == 8  # A2 removed
    assert index.cached_tokens("salt-x", list(range(8)) + [100, 101, 102, 103]) == 12  # the branch stays
    assert index.cached_tokens(None, [0, 1, 2, 3, 9]) == 4  # the unsalted domain's own block
    assert index.cached_tokens("salt-x", [7, 7, 7, 7]) == 0  # medium CPU: not on the device
    assert index.num_blocks == 4


def test_all_blocks_cleared_forgets_everything_before_it():
    index = replayed(2)
    assert index.num_blocks == 2
    assert index.cached_tokens("salt-x", list(range(12))) == 8  # E0 E1, stored after the clear
    assert index.cached_tokens(None, [0, 1, 2, 3]) == 0
    assert index.cached_tokens("salt-x", list(range(8)) + [100, 101, 102, 103]) == 8


def test_a_block_whose_parent_is_unknown_is_skipped_not_guessed():
    index = KVBlockIndex("n", BLOCK_SIZE)
    index.apply([{"type": "BlockStored", "block_hashes": [5], "parent_block_hash": 4, "token_ids": [1, 2, 3, 4],
                  "block_size": 4, "medium": "GPU"}])
    assert index.num_blocks == 0 and index.num_orphans == 1


def test_the_batch_as_a_map_and_events_as_tagged_arrays_decode_alike():
    """Older vLLM encodes events array-like (["BlockStored", hashes, parent, tokens, size, lora, medium]);
    a batch may come as a map too."""
    events = [["BlockStored", [1, 2], None, [0, 1, 2, 3, 4, 5, 6, 7], 4, None, "GPU"], ["BlockRemoved", [2], "GPU"]]
    for batch in ([1.0, events], {"ts": 1.0, "events": events}):
        ts, decoded = decode_batch(msgspec.msgpack.encode(batch))
        index = KVBlockIndex("n")
        index.apply(decoded)
        assert ts == 1.0
        assert index.cached_tokens(None, list(range(8))) == 4


@pytest.mark.parametrize("payload", [b"\xc1", msgspec.msgpack.encode(7), msgspec.msgpack.encode([1.0, [{"no": 1}]]),
                                     msgspec.msgpack.encode([1.0, [["Unknown", 1]]])])
def test_garbage_is_a_clear_error(payload):
    with pytest.raises(ValueError):
        decode_batch(payload)
