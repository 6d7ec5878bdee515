"""A tiny fake ModelRunner for unit tests of the scheduler around it (never for must-show tests).

It stores each token's id and position in the real KVPool at the slots the
scheduler chose, and its "logits" pick next = f(every token the sequence
attends to, read back from the pool). Any page-table mistake (wrong page,
stale page, missing prefix) changes the output, so comparing with
reference_greedy() checks the scheduler's KV bookkeeping end to end.
"""

from __future__ import annotations

import torch

from engine.errors import EngineError
from engine.kv_pool import KVPool

VOCAB = 101
POISON_TOKEN = 100  # a prompt containing it makes forward raise


def next_token(tokens: list[int]) -> int:
    return sum((i + 1) * t for i, t in enumerate(tokens)) % (VOCAB - 1)


def reference_greedy(prompt: list[int], num_tokens: int) -> list[int]:
    tokens = list(prompt)
    for _ in range(num_tokens):
        tokens.append(next_token(tokens))
    return tokens[len(prompt):]


class FakeLoadedModel:
    tokenizer = None
    model_id = "fake"
    max_context = 4096
    eos_token_ids: list[int] = []


class FakeRunner:
    def __init__(self, num_pages: int = 256, page_size: int = 4) -> None:
        self.pool = KVPool(num_pages, page_size, num_layers=1, num_kv_heads=1, head_dim=2)
        self.device = torch.device("cpu")
        self.loaded_model = FakeLoadedModel()
        self.num_forwards = 0
        self.batch_sizes: list[int] = []
        self.token_counts: list[int] = []  # new tokens per forward
        self.poison_token: int | None = POISON_TOKEN
        self.generated_kv_is_shareable = True  # its "K/V" is the token and position, whoever computes it

    def forward(self, batch) -> torch.Tensor:
        batch.validate()
        self.num_forwards += 1
        self.batch_sizes.append(batch.num_seqs)
        self.token_counts.append(batch.num_tokens)
        if self.poison_token is not None and (batch.input_ids == self.poison_token).any():
            raise EngineError("poisoned batch")
        kv = self.pool.k_cache[0]  # (num_slots, 1, 2): token id, position
        kv[batch.out_slots, 0, 0] = batch.input_ids.float()
        kv[batch.out_slots, 0, 1] = batch.positions.float()
        rows = []
        logit_rows = batch.resolve_logit_rows()
        for i, count in zip(logit_rows, batch.num_logit_tokens or [1] * len(logit_rows)):
            slots = batch.seq_kv_slots[i]
            for end in range(len(slots) - count + 1, len(slots) + 1):  # each returned token sees slots [0, end)
                context = kv[slots[:end], 0]
                positions = context[:, 1].long().tolist()
                if positions != list(range(len(positions))):
                    raise EngineError(f"sequence {i} attends to positions {positions}")
                row = torch.zeros(VOCAB)
                row[self.next_token(context[:, 0].long().tolist())] = 1.0
                rows.append(row)
        return torch.stack(rows) if rows else torch.zeros(0, VOCAB)

    @staticmethod
    def next_token(tokens: list[int]) -> int:
        return next_token(tokens)


def next_token_of_last_two(tokens: list[int]) -> int:
    """A "model" that only looks back two tokens: its outputs fall into cycles that drafts can predict."""
    return (tokens[-2] + tokens[-1]) % 7 if len(tokens) > 1 else 1  # Fibonacci mod 7: a cycle of 16


def reference_greedy_of_last_two(prompt: list[int], num_tokens: int) -> list[int]:
    tokens = list(prompt)
    for _ in range(num_tokens):
        tokens.append(next_token_of_last_two(tokens))
    return tokens[len(prompt):]


class CyclingFakeRunner(FakeRunner):
    """FakeRunner whose next token depends on the last two attended tokens only (speculation tests)."""

    @staticmethod
    def next_token(tokens: list[int]) -> int:
        return next_token_of_last_two(tokens)


class TokenizerLoadedModel(FakeLoadedModel):
    """A fake model that carries a real tokenizer (for grammar tests): EOS is the tokenizer's."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.eos_token_ids = [tokenizer.eos_token_id]


class WideFakeRunner(FakeRunner):
    """FakeRunner over a real tokenizer's vocabulary: each row is a pseudo-random preference over all
    tokens, seeded by next_token(context), so outputs still depend on every attended token (and on
    nothing else) while a grammar's mask decides which of them may be chosen."""

    def __init__(self, tokenizer, num_pages: int = 256, page_size: int = 4) -> None:
        super().__init__(num_pages, page_size)
        self.loaded_model = TokenizerLoadedModel(tokenizer)
        self.poison_token = None  # sampled ids span the whole vocabulary
        self.vocab_size = len(tokenizer)

    def forward(self, batch) -> torch.Tensor:
        narrow = super().forward(batch)  # (rows, VOCAB) one-hot at next_token(context)
        rows = []
        for seed in narrow.argmax(dim=-1).tolist():
            generator = torch.Generator().manual_seed(int(seed))
            rows.append(torch.rand(self.vocab_size, generator=generator))
        return torch.stack(rows) if rows else torch.zeros(0, self.vocab_size)
