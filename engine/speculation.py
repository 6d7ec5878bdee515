"""Prompt-lookup speculation: draft tokens for greedy decodes from the request's own tokens, verified exactly.

Agents and RAG answers repeat what they were given: quoted passages, ids, JSON keys, tool arguments.
When the last n tokens of a request (n from ``max_ngram`` down to ``MIN_NGRAM``) occurred earlier in
its prompt or output, the tokens that followed their latest earlier occurrence are proposed as the
next ones. One forward then feeds the pending token plus the d drafts and returns d + 1 logit rows;
draft i is accepted while it equals the argmax of the row before it, and the first row that disagrees
gives one more token, so a verify step delivers between 1 and d + 1 tokens.

Exact. Each verified row's logits are the bits a one-token decode step would have given: paged
attention gives a query the same bits whatever chunk it is attended in, and the packed linears give a
row the same bits at any row count (engine.kernels.paged_attention, engine.kernels.cpu.packed_linear).
So greedy output is the same with speculation on or off (in float32 the last bit of an attention
product may move with its row count, as with the radix cache; on CUDA the attention kernels promise
no invariance, and every delivered token is still the argmax after the tokens before it).

Only greedy requests without a grammar speculate, and only in steps that decode at most ``max_batch``
sequences: a batch-1 step is bound by streaming the weights, so d more rows cost little, while a
wide decode batch already fills the matmuls. A draft's KV slots beyond the accepted tokens hold
garbage until the sequence's next tokens overwrite them; they are never committed to the radix tree
(only slots below ``num_computed`` are) and their pages go back with the request's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from engine.request import Request

MIN_NGRAM = 2  # a single recurring token predicts too little to be worth the rows


def propose(tokens: np.ndarray, num_draft: int, max_ngram: int) -> np.ndarray:
    """Up to ``num_draft`` tokens that followed the latest earlier occurrence of the longest recurring suffix
    of ``tokens`` (``max_ngram`` down to MIN_NGRAM tokens long); empty when none recurs."""
    num_tokens = len(tokens)
    for n in range(min(max_ngram, num_tokens - 1), MIN_NGRAM - 1, -1):
        # windows [i, i + n) for i + n < num_tokens: every occurrence except the suffix itself
        windows = np.lib.stride_tricks.sliding_window_view(tokens[:-1], n)
        hits = np.flatnonzero((windows == tokens[num_tokens - n :]).all(axis=1))
        if hits.size:
            start = int(hits[-1]) + n
            return tokens[start : start + num_draft]
    return tokens[:0]


def matching_prefix(a: list[int], b: list[int]) -> int:
    """How many leading tokens two sequences share: for a verify step, the drafts equal to the argmax of
    the row before them (targets[i] follows draft[i - 1])."""
    count = 0
    for x, y in zip(a, b):
        if x != y:
            break
        count += 1
    return count


class Speculator:
    """Which decodes speculate, their drafts, and what was drafted and accepted."""

    def __init__(self, num_draft: int, max_ngram: int, max_batch: int) -> None:
        self.num_draft = num_draft
        self.max_ngram = max_ngram
        self.max_batch = max_batch
        self.num_verify_steps = 0
        self.num_draft_tokens = 0
        self.num_accepted_tokens = 0

    def applies(self, num_decodes: int) -> bool:
        return 0 < num_decodes <= self.max_batch

    def draft(self, req: Request) -> list[int]:
        """The drafts for ``req``'s next decode step ([] when it must not speculate or nothing recurs)."""
        if req.grammar is not None or not req.params.is_greedy or req.num_outputs == 0:
            return []
        limit = min(self.num_draft, req.params.max_tokens - req.num_outputs - 1)  # never past max_tokens
        if limit <= 0:
            return []
        tokens = np.concatenate([req.prompt_array, np.asarray(req.output_ids, dtype=np.int64)])
        return propose(tokens, limit, self.max_ngram).tolist()

    def verify(self, draft: list[int], targets: list[int]) -> int:
        """Count one verify step; returns how many drafts it accepted."""
        accepted = matching_prefix(draft, targets)
        self.num_verify_steps += 1
        self.num_draft_tokens += len(draft)
        self.num_accepted_tokens += accepted
        return accepted

    def stats(self) -> dict:
        drafted = self.num_draft_tokens
        return {"num_draft": self.num_draft, "max_batch": self.max_batch, "verify_steps": self.num_verify_steps,
                "draft_tokens": drafted, "accepted_tokens": self.num_accepted_tokens,
                "acceptance": round(self.num_accepted_tokens / drafted, 4) if drafted else None}
