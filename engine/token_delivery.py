"""TokenDelivery: what the scheduler does with a step's results, after the forward.

Every chunk advances its request (computed tokens grow; a prefill chunk's pages are committed to the
radix tree); a chunk whose last row produced logits gets its next token sampled, or, when it carried
drafts, as many tokens as the model's argmax agrees with (engine.speculation); each delivered token is
emitted to its request, and a request that reaches its end is handed to `finish` (the scheduler's,
which releases its pages and sends the final output). Under the fair policy every computed token is
charged to the request's fairness key. Runs on the step thread; nothing here is thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from engine.batch_builder import ScheduledChunk
from engine.cache_manager import CacheManager
from engine.errors import EngineError
from engine.fair_queue import FairQueue
from engine.request import Request
from engine.sampler import Sampler
from engine.sampling_params import RequestOutput
from engine.speculation import Speculator


class TokenDelivery:
    """postprocess(chunks, logits): advance, sample or verify, deliver, finish."""

    def __init__(self, cache: CacheManager, fair_queue: FairQueue | None, speculator: Speculator | None,
                 finish: Callable[..., None]) -> None:
        """``fair_queue``: charged with computed tokens (None: not the fair policy); ``finish(req,
        delta_ids=, delta_text=)`` ends a request."""
        self.cache = cache
        self.fair_queue = fair_queue
        self.speculator = speculator
        self.finish = finish
        self.sampler = Sampler()

    def postprocess(self, chunks: list[ScheduledChunk], logits: torch.Tensor | None) -> None:
        """Advance every chunk, sample where logits came back (verify drafts), finish and emit."""
        sampled = [c for c in chunks if c.needs_logits]
        self._check_rows(sampled, logits)
        plain = [c for c in sampled if not c.draft]
        verified = []
        if len(plain) < len(sampled):  # a drafted chunk has 1 + len(draft) rows: split them out
            rows = logits.split([c.num_logit_rows for c in sampled])
            verified = [(c, r) for c, r in zip(sampled, rows) if c.draft]
            logits = torch.cat([r for c, r in zip(sampled, rows) if not c.draft]) if plain else None
        tokens = self._sample(plain, logits)
        prefill_done = [c.req for c in chunks if c.is_last and c.req.is_prefill_only]
        for chunk in chunks:
            if not chunk.draft:
                self._advance(chunk)
        for chunk, token in zip(plain, tokens):
            self._deliver_token(chunk.req, token)
        for chunk, rows in verified:
            self._deliver_verified(chunk, rows)
        for req in prefill_done:
            req.finish_reason = req.finish_reason or "length"  # max_tokens=0 reached, not an abort
            self.finish(req)

    @staticmethod
    def _check_rows(sampled: list[ScheduledChunk], logits: torch.Tensor | None) -> None:
        expected = sum(c.num_logit_rows for c in sampled)
        if expected and (logits is None or logits.shape[0] != expected):
            raise EngineError(f"runner returned logits for {None if logits is None else logits.shape[0]} "
                              f"rows, expected {expected}")

    def _sample(self, sampled: list[ScheduledChunk], logits: torch.Tensor | None) -> list[int]:
        if not sampled:
            return []
        reqs = [c.req for c in sampled]
        return self.sampler.sample(logits, [r.params for r in reqs], [r.generator for r in reqs], [r.grammar for r in reqs])

    def _deliver_verified(self, chunk: ScheduledChunk, rows: torch.Tensor) -> None:
        """A verify step's tokens: the argmax after the decode token, then after each accepted draft, one by
        one; each delivered token's predecessor now has valid KV (num_computed grows with it)."""
        req = chunk.req
        targets = rows.argmax(dim=-1).tolist()
        accepted = self.speculator.verify(chunk.draft, targets)
        if self.fair_queue is not None:
            self.fair_queue.charge(req, chunk.num_fed)
        for token in targets[: accepted + 1]:
            req.num_computed += 1
            self._deliver_token(req, token)
            if req.finish_reason is not None:
                break

    def _advance(self, chunk: ScheduledChunk) -> None:
        req = chunk.req
        is_decode = chunk.num_new == 1 and chunk.is_last and req.num_outputs > 0
        if not is_decode:
            req.num_computed_prefill += chunk.num_new - (1 if chunk.is_last and req.num_outputs > 0 else 0)
        req.num_computed += chunk.num_new
        if self.fair_queue is not None:
            self.fair_queue.charge(req, chunk.num_new)
        if not is_decode:
            self.cache.commit_prefix(req)

    def _deliver_token(self, req: Request, token: int) -> None:
        delta = req.append_token(token)
        if req.finish_reason is not None:
            self.finish(req, delta_ids=[token], delta_text=delta)
        else:
            req.emit(RequestOutput(request_id=req.request_id, token_ids=[token], text=delta))
