"""ForwardBatch: the new tokens of many sequences, flattened into one ragged forward.

One forward runs prefill chunks and decode tokens of any number of sequences
together. Sequence ``i`` contributes ``seq_q_lens[i]`` new tokens, laid out
back to back in ``input_ids``; its KV lives in pool slots ``seq_kv_slots[i]``::

    seq_kv_slots[i] = [ cached prefix slots ........ | slots of the new tokens ]
                      |<-- kv_len - q_len -->|        |<------ q_len ------>|
                                                       == out_slots of seq i

Invariants (checked by ``validate``):
  * ``len(input_ids) == len(positions) == len(out_slots) == sum(seq_q_lens)``
  * the new tokens of a sequence are the LAST ``q_len`` entries of its
    ``seq_kv_slots`` and their slots equal that sequence's part of ``out_slots``
  * positions of sequence ``i`` are ``kv_len_i - q_len_i + arange(q_len_i)``
    (a token at position p attends to kv entries 0..p of its sequence)
``make_forward_batch`` builds a batch that satisfies them from plain lists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch


@dataclass
class ForwardBatch:
    """The ragged input of one ``ModelRunner.forward`` (all tensors on CPU or the model device).

    ``logit_rows``: indices of the sequences whose last new token needs logits,
    in the order the logits rows are returned; ``None`` means every sequence.
    ``num_logit_tokens``: per entry of ``resolve_logit_rows``, how many of that
    sequence's last new tokens return logits (a speculative verify step wants
    them all); ``None`` means one each.
    ``seq_is_generated``: per sequence, True when all its new tokens are generated ones (a decode token, a
    speculative verify, generated tokens recomputed after a preemption): the attention may run such rows on
    its own kernel (see engine.kernels.attention_plan); ``None`` means no sequence is.
    """

    input_ids: torch.Tensor  # (T,) long
    positions: torch.Tensor  # (T,) long
    out_slots: torch.Tensor  # (T,) long: KV slot written for each new token
    seq_q_lens: list[int]  # new tokens per sequence, in order
    seq_kv_slots: list[torch.Tensor]  # per sequence: (kv_len,) long, prefix + new tokens
    logit_rows: list[int] | None = None
    num_logit_tokens: list[int] | None = None
    seq_is_generated: list[bool] | None = None
    seq_kv_lens: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.seq_kv_lens = [int(s.numel()) for s in self.seq_kv_slots]

    @property
    def num_tokens(self) -> int:
        return int(self.input_ids.numel())

    @property
    def num_seqs(self) -> int:
        return len(self.seq_q_lens)

    def resolve_logit_rows(self) -> list[int]:
        return list(range(self.num_seqs)) if self.logit_rows is None else list(self.logit_rows)

    def last_token_indices(self) -> list[int]:
        """Indices into the T new tokens of the tokens whose logits are returned, in order: the last token of
        each sequence in ``resolve_logit_rows`` (its last ``num_logit_tokens[i]`` tokens when given)."""
        ends, total = [], 0
        for q in self.seq_q_lens:
            total += q
            ends.append(total)
        rows = self.resolve_logit_rows()
        counts = self.num_logit_tokens or [1] * len(rows)
        return [t for row, count in zip(rows, counts) for t in range(ends[row] - count, ends[row])]

    def validate(self) -> None:
        """Raise ValueError when the invariants in the module docstring do not hold."""
        num_tokens = self.num_tokens
        if len(self.seq_kv_slots) != len(self.seq_q_lens):
            raise ValueError("seq_q_lens and seq_kv_slots differ in length")
        if sum(self.seq_q_lens) != num_tokens:
            raise ValueError(f"sum(seq_q_lens)={sum(self.seq_q_lens)} != num_tokens={num_tokens}")
        if self.positions.numel() != num_tokens or self.out_slots.numel() != num_tokens:
            raise ValueError("positions and out_slots must have one entry per new token")
        start = 0
        for i, (q_len, kv_len) in enumerate(zip(self.seq_q_lens, self.seq_kv_lens)):
            if q_len < 1 or kv_len < q_len:
                raise ValueError(f"sequence {i}: q_len={q_len} kv_len={kv_len}")
            if not torch.equal(self.out_slots[start : start + q_len], self.seq_kv_slots[i][kv_len - q_len :]):
                raise ValueError(f"sequence {i}: out_slots are not the last q_len kv slots")
            if int(self.positions[start]) != kv_len - q_len:
                raise ValueError(f"sequence {i}: first position {int(self.positions[start])} != {kv_len - q_len}")
            start += q_len
        if self.logit_rows is not None and any(not 0 <= r < self.num_seqs for r in self.logit_rows):
            raise ValueError(f"logit_rows out of range: {self.logit_rows}")
        if self.num_logit_tokens is not None:
            rows = self.resolve_logit_rows()
            if len(self.num_logit_tokens) != len(rows) or any(
                    not 1 <= n <= self.seq_q_lens[r] for r, n in zip(rows, self.num_logit_tokens)):
                raise ValueError(f"num_logit_tokens {self.num_logit_tokens} do not fit logit rows {rows}")
        if self.seq_is_generated is not None and len(self.seq_is_generated) != self.num_seqs:
            raise ValueError("seq_is_generated needs one entry per sequence")


def make_forward_batch(
    new_token_ids: Sequence[Sequence[int]],
    seq_kv_slots: Sequence[Sequence[int] | torch.Tensor],
    logit_rows: list[int] | None = None,
    num_logit_tokens: list[int] | None = None,
    is_generated: bool = False,
) -> ForwardBatch:
    """Build a ForwardBatch from each sequence's new token ids and ALL its kv slots.

    Positions and out_slots are derived: the new tokens occupy the last slots. ``is_generated`` marks every
    sequence's new tokens as generated ones (a decode step), so they run where the engine runs decode tokens.
    """
    kv_slots = [torch.as_tensor(s, dtype=torch.long) for s in seq_kv_slots]
    q_lens = [len(ids) for ids in new_token_ids]
    flat_ids = [int(t) for ids in new_token_ids for t in ids]
    positions, out_slots = [], []
    for q_len, slots in zip(q_lens, kv_slots):
        prefix = int(slots.numel()) - q_len
        positions.extend(range(prefix, prefix + q_len))
        out_slots.append(slots[prefix:])
    return ForwardBatch(
        input_ids=torch.tensor(flat_ids, dtype=torch.long),
        positions=torch.tensor(positions, dtype=torch.long),
        out_slots=torch.cat(out_slots) if out_slots else torch.empty(0, dtype=torch.long),
        seq_q_lens=q_lens,
        seq_kv_slots=kv_slots,
        logit_rows=logit_rows,
        num_logit_tokens=num_logit_tokens,
        seq_is_generated=[True] * len(q_lens) if is_generated else None,
    )
