"""How far one runner's next-token distributions are from another's on the same tokens (teacher-forced).

Both runners read the same token sequence one forward per position (a prefill of the first
token, then one decode step per later token, the way serving runs them), so every position is
conditioned on the same prefix in both and the figures isolate the numerics:

    mean_kl          mean over positions of KL(reference || other), in nats, from float32 logits
    top1_agreement   share of positions where both put the same token first

The runner's own ``auto`` precision logs these against the float32 model on PROBE_TEXT;
``radixgate bench accuracy`` computes them over a prompt set.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.forward_batch import make_forward_batch

PROBE_TEXT = ("The capital of France is Paris. Water boils at one hundred degrees Celsius at sea level. "
              "def add(a, b):\n    return a + b\nThe quick brown fox jumps over the lazy dog.")


@dataclass(frozen=True)
class Divergence:
    mean_kl: float
    top1_agreement: float
    num_positions: int


def compare_logits(reference: torch.Tensor, other: torch.Tensor) -> Divergence:
    """reference/other (positions, vocab) logits -> mean KL(reference || other) and top-1 agreement."""
    ref_logp = torch.log_softmax(reference.float(), dim=-1)
    other_logp = torch.log_softmax(other.float(), dim=-1)
    kl = (ref_logp.exp() * (ref_logp - other_logp)).sum(dim=-1).clamp(min=0)  # (positions,)
    agree = (reference.argmax(dim=-1) == other.argmax(dim=-1)).float()
    return Divergence(float(kl.mean()), float(agree.mean()), int(kl.numel()))


@torch.inference_mode()
def teacher_forced_logits(runner, token_ids: list[int]) -> torch.Tensor:
    """(len(token_ids), vocab) float32 logits: row i is the distribution after token_ids[: i + 1].

    Takes pages from ``runner.pool`` and returns them before it returns."""
    pool = runner.pool
    pages = pool.allocate(-(-len(token_ids) // pool.page_size))
    try:
        slots = pool.slots(pages)[: len(token_ids)]
        rows = []
        for i, token in enumerate(token_ids):
            rows.append(runner.forward(make_forward_batch([[token]], [slots[: i + 1]], is_generated=True))[0])
        return torch.stack(rows).cpu()
    finally:
        pool.free(pages)


def divergence(reference_runner, runner, token_ids: list[int]) -> Divergence:
    """compare_logits of the two runners' teacher-forced logits over ``token_ids``."""
    return compare_logits(teacher_forced_logits(reference_runner, token_ids), teacher_forced_logits(runner, token_ids))


def probe_token_ids(tokenizer, max_tokens: int = 48) -> list[int]:
    return tokenizer.encode(PROBE_TEXT, add_special_tokens=False)[:max_tokens]
