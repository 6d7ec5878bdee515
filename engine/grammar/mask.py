"""Token bitmasks: fill one row per constrained request in one pass, apply them to the logits in place.

The bitmask is int32 words, bit j of word w allowing token 32 * w + j (llguidance's
layout). Logit columns past the tokenizer's vocabulary (padding of the embedding)
are never allowed for a constrained row.
"""

from __future__ import annotations

import torch

BITS = torch.arange(32, dtype=torch.int32)


class MaskFiller:
    """Fills bitmasks for many matchers at once, on llguidance's own thread pool."""

    def __init__(self, num_threads: int = 2) -> None:
        self._num_threads = num_threads
        self._executor = None

    def fill(self, matchers: list, vocab_size: int) -> torch.Tensor:
        """(len(matchers), ceil(vocab_size / 32)) int32 masks, row i for matchers[i]."""
        import llguidance
        import llguidance.torch as llg_torch

        if self._executor is None:
            self._executor = llguidance.LLExecutor(self._num_threads)
        bitmask = llg_torch.allocate_token_bitmask(len(matchers), vocab_size)
        if len(matchers) == 1:  # no hand-off to the pool for a single row
            llg_torch.fill_next_token_bitmask(matchers[0], bitmask, 0)
        else:
            llg_torch.fill_next_token_bitmask_par(self._executor, [(m, i) for i, m in enumerate(matchers)], bitmask)
        return bitmask


def apply_bitmask(logits: torch.Tensor, rows: list[int], bitmask: torch.Tensor) -> None:
    """Set to -inf every logit of logits[rows[i]] whose token bitmask[i] forbids. logits: (num_rows, vocab)."""
    # (len(rows), words * 32) bool: bit j of word w -> column 32 * w + j
    allowed = ((bitmask.unsqueeze(-1) >> BITS) & 1).bool().flatten(1)
    width = logits.shape[-1]
    if allowed.shape[1] < width:
        allowed = torch.nn.functional.pad(allowed, (0, width - allowed.shape[1]), value=False)
    forbidden = ~allowed[:, :width].to(logits.device)
    if rows == list(range(logits.shape[0])):  # every row constrained: mask in place, no gather
        logits.masked_fill_(forbidden, float("-inf"))
        return
    index = torch.tensor(rows, dtype=torch.long, device=logits.device)
    selected = logits.index_select(0, index)
    selected.masked_fill_(forbidden, float("-inf"))
    logits.index_copy_(0, index, selected)
