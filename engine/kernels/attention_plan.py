"""How one ragged forward's attention is cut into groups (the plan; engine.kernels.paged_attention runs it).

Every sequence's new tokens become one or more *units* (queries ``[a, b)`` of
that sequence over its kv slots ``[0, prefix + b)``): a short sequence (at most
``MAX_BUCKET`` new tokens, e.g. every decode token) is one unit; a long prefill
chunk is cut into pieces of ``MAX_PIECE`` queries, so a piece early in a causal
chunk reads only the keys it can see. Short units are batched by length bucket
(1, 2, 4, 8, 16, 32, 48, 64 queries: a short unit at most doubles, a longer one
gains at most 15 padded rows) and attended in one
set of matmuls; each piece is a group of its own.

Keys are read in blocks of ``BLOCK`` positions counted from position 0 of the
sequence. When the sequences of a group begin with the same cached slots (a
shared system prompt or document), the whole blocks of that prefix are
gathered once and attended for all of them in one matmul ("cascade").
Because every query always meets the same blocks in the same order, whatever
group, piece or cascade it lands in, its result does not depend on the batch
(see engine.kernels.paged_attention).

Where the native CPU kernels build, the groups are not needed. With the
chunk kernel (``by_chunks``: AVX2 or AVX-512, and the layer has no sliding
window) every row, prompt or generated, goes to ``KernelRows``: each
sequence's slots once, and each row's sequence and key count; the kernel
attends rows a tile at a time over chunks of keys, each row still on its own.
Otherwise (``by_row`` alone) only the rows of generated tokens
(``seq_is_generated``) skip the groups: ``GeneratedRows`` lists each row's
keys as a range of one flat slot list, and the decode kernel attends them row
by row.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.forward_batch import ForwardBatch

BLOCK = 128  # key positions per block: the unit of the cascade and of the fixed-order sum
MAX_BUCKET = 64  # sequences with at most this many new tokens are batched together
BUCKET_STEP = 16  # above this, buckets grow by this step instead of doubling (46-token suffixes: 48, not 64)
MAX_PIECE = 128  # longer prefill chunks are attended this many queries at a time


@dataclass
class Unit:
    seq: int  # index of the sequence in the batch
    token_start: int  # index among the T new tokens of the unit's first query
    q_len: int
    kv_len: int  # keys visible to the unit's last query: the sequence's slots [0, kv_len)


@dataclass
class AttentionGroup:
    """Units attended together: queries padded to ``max_q`` per unit, keys in whole blocks."""

    token_index: torch.Tensor | None  # (B * max_q,) rows of q to gather; None = identity
    row_index: torch.Tensor | None  # real rows among the B * max_q padded ones; None = all
    out_index: torch.Tensor | None  # where the real rows go among T; None = identity
    own_rows: torch.Tensor  # (KVH * B * n_own * BLOCK,) pool rows (see head_major_rows) of the keys after
    #                         the shared blocks; padding repeats a real slot
    mask: torch.Tensor | None  # (B, G * max_q, n_own * BLOCK) in the model dtype: 0 = attend, -inf = hidden
    shared_rows: torch.Tensor | None  # (KVH * n_shared * BLOCK,) pool rows of the blocks every unit starts with;
    #                                   None when they are one run of slots (shared_start) or there are none
    shared_start: int | None  # first slot of the shared blocks when their slots are one ascending run
    num_seqs: int
    max_q: int
    num_own_blocks: int
    num_shared_blocks: int  # 0 when nothing is shared


@dataclass
class GeneratedRows:
    """Rows of generated tokens, attended one query row at a time: row n reads slots[begins[n]:ends[n]]."""

    token_index: torch.Tensor | None  # (N,) rows of q, in order; None = all T tokens
    slots: torch.Tensor  # (M,) long: the key slots of each sequence with generated rows, once
    begins: torch.Tensor  # (N,) long
    ends: torch.Tensor  # (N,) long


@dataclass
class KernelRows:
    """The rows of the chunk kernel, all T of them in order: row n reads the first ends[n] of its sequence's
    slots, which start at seq_begins[seqs[n]] in ``slots``; a sequence's rows are consecutive, in position
    order."""

    slots: torch.Tensor  # (M,) long: every sequence's key slots, once
    seq_begins: torch.Tensor  # (S,) long
    seqs: torch.Tensor  # (N,) long
    ends: torch.Tensor  # (N,) long


@dataclass
class AttentionPlan:
    out_slots: torch.Tensor  # (T,) long
    num_tokens: int
    groups: list[AttentionGroup]
    generated: GeneratedRows | None = None
    rows: KernelRows | None = None


def split_units(batch: ForwardBatch, skipped: list[bool] | None = None) -> tuple[dict[int, list[Unit]], list[Unit]]:
    """Short units by length bucket, and the pieces of long prefill chunks (of the sequences not skipped)."""
    buckets: dict[int, list[Unit]] = {}
    pieces: list[Unit] = []
    start = 0
    for i, (q_len, kv_len) in enumerate(zip(batch.seq_q_lens, batch.seq_kv_lens)):
        prefix = kv_len - q_len
        if skipped is not None and skipped[i]:
            pass
        elif q_len <= MAX_BUCKET:
            bucket = length_bucket(q_len)
            buckets.setdefault(bucket, []).append(Unit(i, start, q_len, kv_len))
        else:
            for a in range(0, q_len, MAX_PIECE):
                b = min(q_len, a + MAX_PIECE)
                pieces.append(Unit(i, start + a, b - a, prefix + b))
        start += q_len
    return buckets, pieces


def length_bucket(q_len: int) -> int:
    """1, 2, 4, 8, 16, then multiples of BUCKET_STEP: a padded unit is at most twice as long (short units) or
    BUCKET_STEP - 1 rows longer (long ones)."""
    if q_len <= BUCKET_STEP:
        return 1 << (q_len - 1).bit_length()
    return -(-q_len // BUCKET_STEP) * BUCKET_STEP


def plan_attention(batch: ForwardBatch, num_kv_heads: int, group_size: int, window: int | None, dtype: torch.dtype,
                   device, by_row: bool = False, by_chunks: bool = False) -> AttentionPlan:
    """``by_row``: the rows of generated tokens go to GeneratedRows instead of the groups; ``by_chunks``
    (with ``by_row``, no window): every row goes to KernelRows, and there are no groups."""
    if by_row and by_chunks and window is None:
        return AttentionPlan(batch.out_slots.to(device), batch.num_tokens, [], None, plan_kernel_rows(batch, device))
    is_generated = batch.seq_is_generated or [False] * len(batch.seq_q_lens)
    by_row = by_row and any(is_generated)
    skipped = batch.seq_is_generated if by_row else None
    buckets, pieces = split_units(batch, skipped)
    units_per_group = [buckets[k] for k in sorted(buckets)] + [[piece] for piece in pieces]
    groups = [plan_group(batch, units, num_kv_heads, group_size, window, dtype, device) for units in units_per_group]
    generated = plan_generated_rows(batch, window, device) if by_row else None
    return AttentionPlan(batch.out_slots.to(device), batch.num_tokens, groups, generated)


def plan_kernel_rows(batch: ForwardBatch, device) -> KernelRows:
    """Every query row of the batch, prompt or generated; a row at position p reads keys [0, p]."""
    seqs, ends, slots, begins = [], [], [], []
    offset = 0
    for seq, (q_len, kv_len, kv_slots) in enumerate(zip(batch.seq_q_lens, batch.seq_kv_lens, batch.seq_kv_slots)):
        begins.append(offset)
        slots.append(kv_slots[:kv_len])
        seqs.extend([seq] * q_len)
        ends.extend(range(kv_len - q_len + 1, kv_len + 1))
        offset += kv_len
    return KernelRows(torch.cat(slots).to(device), long_tensor(begins, device), long_tensor(seqs, device),
                      long_tensor(ends, device))


def plan_generated_rows(batch: ForwardBatch, window: int | None, device) -> GeneratedRows:
    """The query rows of the generated sequences; a row at position p reads keys (p - window, p]."""
    token_index, begins, ends, slots = [], [], [], []
    token_start = offset = 0
    for q_len, kv_len, kv_slots, is_generated in zip(batch.seq_q_lens, batch.seq_kv_lens, batch.seq_kv_slots,
                                                     batch.seq_is_generated):
        if is_generated:
            slots.append(kv_slots)
            for row in range(q_len):
                end = kv_len - q_len + row + 1  # keys [0, end) are visible to this row
                token_index.append(token_start + row)
                begins.append(offset + (0 if window is None else max(0, end - window)))
                ends.append(offset + end)
            offset += kv_len
        token_start += q_len
    return GeneratedRows(rows_index(token_index, batch.num_tokens, device), torch.cat(slots).to(device),
                         long_tensor(begins, device), long_tensor(ends, device))


def long_tensor(values: list[int], device) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.long, device=device)


def rows_index(token_index: list[int], num_tokens: int, device) -> torch.Tensor | None:
    """The rows of q a by-row kernel takes, or None when it takes all of them in order."""
    return None if len(token_index) == num_tokens else long_tensor(token_index, device)


def plan_group(batch: ForwardBatch, units: list[Unit], num_kv_heads: int, group_size: int, window: int | None,
               dtype: torch.dtype, device) -> AttentionGroup:
    """Index tensors and the mask of one group, vectorized over its B units."""
    num_seqs = len(units)
    starts = torch.tensor([u.token_start for u in units])
    q_lens = torch.tensor([u.q_len for u in units])
    kv_lens = torch.tensor([u.kv_len for u in units])
    # at least two query rows per (unit, kv head): a one-row matmul takes another kernel with other rounding
    max_q = max(int(q_lens.max()), 1 if group_size > 1 else 2)
    slots = torch.nn.utils.rnn.pad_sequence(
        [batch.seq_kv_slots[u.seq][: u.kv_len].cpu() for u in units], batch_first=True)  # (B, max_kv)
    num_shared = _num_shared_blocks(slots, kv_lens - q_lens) * BLOCK if window is None else 0
    shared_start = run_start(slots[0, :num_shared]) if num_shared else None
    own_lens = kv_lens - num_shared
    own_width = -(-int(own_lens.max()) // BLOCK) * BLOCK
    cols = torch.arange(own_width)
    own = slots[:, num_shared:]
    own = torch.cat([own, own[:, :1].expand(num_seqs, max(0, own_width - own.shape[1]))], dim=1)
    own_slots = torch.where(cols[None, :] < own_lens[:, None], own, own[:, :1])  # (B, own_width)

    rows = torch.arange(max_q)
    last_row = torch.minimum(rows[None, :], q_lens[:, None] - 1)  # padded rows repeat the last real query
    q_pos = (kv_lens - q_lens)[:, None] + last_row  # (B, max_q)
    key_pos = num_shared + cols  # (own_width,)
    visible = key_pos[None, None, :] <= q_pos[:, :, None]  # (B, max_q, own_width)
    if window is not None:
        visible &= key_pos[None, None, :] > q_pos[:, :, None] - window
    mask = None
    if not bool(visible.all()):
        g = group_size
        visible = visible[:, None].expand(num_seqs, g, max_q, own_width).reshape(num_seqs, g * max_q, own_width)
        mask = torch.zeros(visible.shape, dtype=dtype).masked_fill_(~visible, float("-inf")).to(device)

    token_index = (starts[:, None] + last_row).reshape(-1)
    is_real = (rows[None, :] < q_lens[:, None]).reshape(-1)
    real_rows = is_real.nonzero().squeeze(1)
    out_index = token_index[real_rows]
    is_identity = max_q == 1 and num_seqs == batch.num_tokens and bool((starts == torch.arange(num_seqs)).all())
    return AttentionGroup(
        token_index=None if is_identity else token_index.to(device),
        row_index=None if bool(is_real.all()) else real_rows.to(device),
        out_index=None if is_identity else out_index.to(device),
        own_rows=head_major_rows(own_slots, num_kv_heads).to(device),
        mask=mask,
        shared_rows=None if num_shared == 0 or shared_start is not None else
        head_major_rows(slots[0, :num_shared], num_kv_heads).to(device),
        shared_start=shared_start,
        num_seqs=num_seqs,
        max_q=max_q,
        num_own_blocks=own_width // BLOCK,
        num_shared_blocks=num_shared // BLOCK,
    )


def head_major_rows(slots: torch.Tensor, num_kv_heads: int) -> torch.Tensor:
    """Rows of a pool layer viewed as (num_slots * KVH, D) for every head of every slot, head first:
    one index_select then yields (KVH, *slots.shape, D) with no permute copy."""
    heads = torch.arange(num_kv_heads).view(-1, *([1] * slots.dim()))
    return (slots[None] * num_kv_heads + heads).reshape(-1)


def run_start(slots: torch.Tensor) -> int | None:
    """The first slot when ``slots`` are consecutive ascending (a view of the pool reads them), else None."""
    first = int(slots[0])
    return first if bool((slots == torch.arange(first, first + len(slots))).all()) else None


def _num_shared_blocks(slots: torch.Tensor, prefix_lens: torch.Tensor) -> int:
    """Whole leading blocks that all B units share and have cached (visible to every query)."""
    if slots.shape[0] < 2:
        return 0
    limit = int(prefix_lens.min()) // BLOCK * BLOCK
    if limit == 0:
        return 0
    same = (slots[:, :limit] == slots[:1, :limit]).all(dim=0)  # (limit,)
    num_same = limit if bool(same.all()) else int((~same).nonzero()[0, 0])
    return num_same // BLOCK
