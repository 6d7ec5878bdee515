"""Sampler: picks one next token per row of logits.

Greedy rows (temperature 0 or top_k 1) take the argmax together in one op.
Sampled rows apply temperature, then top-k, then top-p (nucleus, always
keeping the most likely token) and draw with the request's own
torch.Generator, so a seeded request gives the same tokens whatever else is
in the batch. Rows under a grammar first get the grammar's token bitmask
(engine.grammar.mask): all constrained rows of a batch are filled in one
parallel pass and masked in one op, before any row is chosen.
"""

from __future__ import annotations

import torch

from engine.grammar.mask import MaskFiller, apply_bitmask
from engine.grammar.state import GrammarState
from engine.sampling_params import SamplingParams


def make_generator(seed: int | None) -> torch.Generator:
    """A CPU generator for one request: seeded, or from fresh OS entropy."""
    generator = torch.Generator(device="cpu")
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed)
    return generator


def filter_top_k(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    """Keep the top_k largest logits of a (vocab,) row; the rest become -inf."""
    if top_k <= 0 or top_k >= logits.shape[-1]:
        return logits
    threshold = torch.topk(logits, top_k).values[-1]
    return logits.masked_fill(logits < threshold, float("-inf"))


def filter_top_p(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose probability reaches top_p."""
    if top_p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, descending=True)
    probs = torch.softmax(sorted_logits, dim=-1)
    mass_before = torch.cumsum(probs, dim=-1) - probs  # probability of strictly better tokens
    drop_sorted = mass_before >= top_p
    drop_sorted[0] = False
    drop = torch.zeros_like(drop_sorted).scatter(0, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def sample_row(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator) -> int:
    """Draw one token from a (vocab,) float32 row under params."""
    if params.is_greedy:
        return int(torch.argmax(logits))
    scaled = logits.float() / params.temperature
    scaled = filter_top_p(filter_top_k(scaled, params.top_k), params.top_p)
    probs = torch.softmax(scaled, dim=-1)
    return int(torch.multinomial(probs.cpu(), 1, generator=generator))


class Sampler:
    """Samples a batch: one row of logits per request, in order."""

    def __init__(self) -> None:
        self._mask_filler = MaskFiller()

    def sample(
        self, logits: torch.Tensor, params: list[SamplingParams], generators: list[torch.Generator],
        grammars: list[GrammarState | None] | None = None,
    ) -> list[int]:
        """logits: (num_rows, vocab) float32; returns one token id per row (grammars[i] constrains row i)."""
        if logits.shape[0] != len(params):
            raise ValueError(f"{logits.shape[0]} logit rows for {len(params)} requests")
        self.mask(logits, grammars or [])
        tokens = torch.argmax(logits, dim=-1).tolist()
        for row, (row_params, generator) in enumerate(zip(params, generators)):
            if not row_params.is_greedy:
                tokens[row] = sample_row(logits[row].cpu(), row_params, generator)
        return tokens

    def mask(self, logits: torch.Tensor, grammars: list[GrammarState | None]) -> None:
        """Forbid, in place, every token a row's grammar does not allow next."""
        rows = [row for row, grammar in enumerate(grammars) if grammar is not None and grammar.needs_mask]
        if rows:
            bitmask = self._mask_filler.fill([grammars[row].matcher for row in rows], logits.shape[-1])
            with torch.inference_mode():  # the runner's logits are inference tensors
                apply_bitmask(logits, rows, bitmask)
