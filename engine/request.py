"""Request: one generation's tokens, KV pages and progress, owned by the step thread.

Token ranges of a running request (all indices in tokens; page_size = P)::

    tokens   |<------------------- prompt -------------------->|<-- output -->|
    index    0                 num_tree_tokens           num_computed     num_tokens
             |===== in tree ======|===== own pages =====|..... to compute .....|
             |  locked via        |  one pool reference |  next chunk; the last |
             |  tree_node, no ref |  held per page      |  one gets logits      |
    pages    [ t0 t1 ... t(k-1)   | o0 o1 ... o(m-1)  ]   k = num_tree_tokens / P

Invariants:
  * num_tree_tokens % P == 0 and num_tree_tokens <= num_computed < num_tokens
    while running (there is always at least one token to feed: the next
    chunk or the last sampled token).
  * len(pages) * P >= num_computed: every computed token has its KV slot
    (slot of token j = pages[j // P] * P + j % P).
  * pages[:k] belong to the radix tree (the request holds the lock on
    tree_node, never a reference); pages[k:] each carry one reference owned by
    the request.
  * Release (finish / abort / preempt): insert tokens[:aligned(num_computed)]
    with their pages (the tree takes over own references and frees
    duplicates), free the partial tail page, unlock tree_node. With the radix
    cache off, every own page is freed instead.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable

import numpy as np
import torch

from engine.detokenizer import Detokenizer
from engine.grammar.state import GrammarState
from engine.sampling_params import RequestOutput, SamplingParams, Usage


class RequestStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


class Request:
    """A request as the scheduler sees it; mutated only by the step thread."""

    def __init__(
        self,
        request_id: str,
        prompt_ids: list[int],
        params: SamplingParams,
        namespace: str,
        *,
        detokenizer: Detokenizer | None,
        generator: torch.Generator,
        emit: Callable[[RequestOutput], None],
        eos_token_ids: frozenset[int] = frozenset(),
        grammar: GrammarState | None = None,
        fairness_key: str | None = None,
        weight: float = 1.0,
        queue_timeout_s: float | None = None,
    ) -> None:
        if weight <= 0:
            raise ValueError(f"weight must be > 0, got {weight}")
        self.request_id = request_id
        self.namespace = namespace
        self.fairness_key = namespace if fairness_key is None else fairness_key  # whose share it counts against
        self.weight = weight
        self.params = params
        self.tokens: list[int] = list(prompt_ids)
        self.prompt_array = np.asarray(prompt_ids, dtype=np.int64)
        self.num_prompt_tokens = len(prompt_ids)
        self.detokenizer = detokenizer
        self.generator = generator
        self.emit = emit
        self.grammar = grammar
        self.stop_ids = frozenset(params.stop_token_ids) | (frozenset() if params.ignore_eos else eos_token_ids)
        self.status = RequestStatus.WAITING
        self.pages: list[int] = []
        self.num_tree_tokens = 0
        self.num_computed = 0
        self.tree_node = None
        self.is_prefill_only = params.max_tokens == 0
        self.finish_reason: str | None = None
        self.error: BaseException | None = None
        self.num_cached_tokens: int | None = None  # device and host hits at the first admission
        self.num_host_cached_tokens = 0  # of those, the tokens loaded from the host tier
        self.num_computed_prefill = 0
        self.num_preemptions = 0
        self.arrival_s = time.perf_counter()
        # past this (perf_counter seconds) a request never scheduled yet leaves the queue with QueueTimeoutError
        self.queue_deadline_s = None if queue_timeout_s is None else self.arrival_s + queue_timeout_s
        self.first_token_s: float | None = None
        self.on_finish: Callable[[Request], None] | None = None
        # prompt prefixes to lease once computed (engine.radix_pins.PrefixPins), still to do, shortest first
        self.prefix_pins = None
        self.pending_pins: list[tuple[int, float]] = []
        self.is_counted_waiting = False
        self._blocks: list[bytes] | None = None

    # ---- token ranges -------------------------------------------------
    @property
    def num_tokens(self) -> int:
        return len(self.tokens)

    @property
    def num_pending(self) -> int:
        """Tokens whose KV still has to be computed (>= 1 while running)."""
        return self.num_tokens - self.num_computed

    @property
    def output_ids(self) -> list[int]:
        return self.tokens[self.num_prompt_tokens :]

    @property
    def num_outputs(self) -> int:
        return self.num_tokens - self.num_prompt_tokens

    def prompt_blocks(self, page_size: int) -> list[bytes]:
        """The prompt's full pages as bytes keys (computed once; for tree-shaped policies)."""
        if self._blocks is None:
            data = self.prompt_array[: len(self.prompt_array) // page_size * page_size]
            self._blocks = [block.tobytes() for block in data.reshape(-1, page_size)]
        return self._blocks

    @property
    def was_scheduled(self) -> bool:
        """True once the request was first admitted (a preempted request stays True)."""
        return self.num_cached_tokens is not None

    def match_limit(self) -> int:
        """How many leading tokens may come from the cache: one token must stay to feed."""
        return self.num_tokens if self.is_prefill_only else self.num_tokens - 1

    # ---- outputs ------------------------------------------------------
    def append_token(self, token_id: int) -> str:
        """Record a sampled token, decide whether it finishes the request; return its text delta."""
        now = time.perf_counter()
        if self.first_token_s is None:
            self.first_token_s = now
        self.tokens.append(token_id)
        grammar = self.grammar
        if grammar is not None:
            grammar.accept(token_id)
        if token_id in self.stop_ids:
            self.finish_reason = grammar.grammar.finish_reason if grammar and grammar.is_in_force else "stop"
            return self.detokenizer.finish() if self.detokenizer else ""
        delta = self.detokenizer.add_token(token_id) if self.detokenizer else ""
        if self.detokenizer is not None and self.detokenizer.is_stopped:
            self.finish_reason = "stop"
        elif grammar is not None and grammar.is_finished:
            self.finish_reason = grammar.grammar.finish_reason
            delta += self.detokenizer.finish() if self.detokenizer else ""
        elif self.num_outputs >= self.params.max_tokens:
            self.finish_reason = "length"
            delta += self.detokenizer.finish() if self.detokenizer else ""
        return delta

    def usage(self) -> Usage:
        end = time.perf_counter()
        first = self.first_token_s if self.first_token_s is not None else end
        return Usage(
            prompt_tokens=self.num_prompt_tokens,
            cached_tokens=self.num_cached_tokens or 0,
            host_cached_tokens=min(self.num_host_cached_tokens, self.num_cached_tokens or 0),
            computed_prefill_tokens=self.num_computed_prefill,
            completion_tokens=self.num_outputs,
            ttft_s=first - self.arrival_s,
            decode_s=end - first,
        )

    def final_output(self, delta_ids: list[int], delta_text: str) -> RequestOutput:
        text = self.detokenizer.text if self.detokenizer else ""
        return RequestOutput(
            request_id=self.request_id,
            token_ids=delta_ids,
            text=delta_text,
            finish_reason=self.finish_reason,
            usage=self.usage(),
            output_token_ids=self.output_ids,
            output_text=text,
            error=self.error,
            stop_sequence=self.detokenizer.matched_stop if self.detokenizer else None,
        )
