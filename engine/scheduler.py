"""Scheduler: continuous batching with chunked prefill over a radix-cached KV pool.

One step = schedule() -> runner.forward(batch) -> postprocess(chunks, logits):

  0. a waiting request never scheduled yet whose queue deadline has passed
     leaves the queue (it holds no pages, slots or tree locks while it waits)
     and ends with QueueTimeoutError; under `fair`, when every slot is taken
     and a waiting key runs two fewer requests than another key, the other
     key's newest request is preempted to free a slot (share_slots);
  1. every running request with one pending token (decode) gets its token;
     if no page is left for it, evict LRU tree leaves, then preempt the
     newest running request (its computed prefix stays in the tree) and
     requeue it at the front of the waiting queue; when few decode, greedy
     ones also carry drafts to verify (engine.speculation), on pages that are
     free without evicting anyone;
  2. running requests still prefilling get their next chunk (token budget; a chunk that would leave
     a short remainder takes it too, see TAIL_FRACTION);
  3. waiting requests are admitted in policy order (engine.policy, or the
     fair queue of engine.fair_queue, which every computed chunk is charged
     to) while budget, pages and max_running allow. In-batch dedup: a waiting
     request whose prompt shares a not-yet-cached prefix with a request that
     is computing it right now stays waiting until that prefix is in the
     tree, then prefills only the rest.

The scheduler lives on the step thread; nothing here is thread-safe.
"""

from __future__ import annotations

import time
from collections import Counter, deque

import numpy as np
import torch

from engine.batch_builder import ScheduledChunk
from engine.cache_manager import CacheManager
from engine.config import EngineConfig
from engine.errors import OutOfPagesError, QueueTimeoutError
from engine.fair_queue import FairQueue
from engine.policy import order_waiting
from engine.request import Request, RequestStatus
from engine.speculation import Speculator
from engine.token_delivery import TokenDelivery

MAX_POLICY_WINDOW = 512
TAIL_FRACTION = 16  # a prefill chunk may overshoot the step budget by 1/16 to finish its request


def common_prefix_len(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


class Scheduler:
    """Waiting queue, running set, and the per-step plan."""

    def __init__(self, config: EngineConfig, cache: CacheManager) -> None:
        self.config = config
        self.cache = cache
        self.page_size = cache.page_size
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.fair_queue = FairQueue(config.fair_cached_token_cost)
        self.num_preemptions = 0
        self.num_finished = 0
        self.num_queue_timeouts = 0
        self.speculator = (Speculator(config.speculative_tokens, config.speculative_ngram, config.speculative_max_batch)
                           if config.speculative_tokens > 0 else None)
        self.delivery = TokenDelivery(cache, self.fair_queue if config.policy == "fair" else None, self.speculator,
                                      self.finish)

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def add_request(self, req: Request) -> None:
        self.waiting.append(req)

    # ---- planning -----------------------------------------------------
    def schedule(self) -> list[ScheduledChunk]:
        """The chunks of the next forward (possibly empty when nothing fits)."""
        self.expire_waiting(time.perf_counter())
        if self.config.policy == "fair":
            self.share_slots()
        chunks = self._schedule_decodes()
        budget = self.config.max_batch_tokens - sum(chunk.num_fed for chunk in chunks)
        budget = self._schedule_running_prefills(chunks, budget)
        self._admit_waiting(chunks, budget)
        return chunks

    def expire_waiting(self, now: float) -> None:
        """End every never-scheduled waiting request whose queue deadline is at or before `now`."""
        for req in [r for r in self.waiting if r.queue_deadline_s is not None and not r.was_scheduled]:
            if req.queue_deadline_s <= now:
                self.num_queue_timeouts += 1
                waited = now - req.arrival_s
                self.fail(req, QueueTimeoutError(f"request {req.request_id} waited {waited:.1f} s in the queue "
                                                 "without being scheduled"))

    def _schedule_decodes(self) -> list[ScheduledChunk]:
        chunks: list[ScheduledChunk] = []
        for req in list(self.running):
            if req.status is not RequestStatus.RUNNING or req.num_pending != 1:
                continue
            while not self.cache.ensure_pages(req, 1):
                if not self._preempt_newest(req):
                    break
            if req.status is RequestStatus.RUNNING and req.num_pending == 1:
                chunks.append(ScheduledChunk(req, 1))
        if self.speculator is not None and self.speculator.applies(len(chunks)):
            for chunk in chunks:
                self._attach_draft(chunk)
        return chunks

    def _attach_draft(self, chunk: ScheduledChunk) -> None:
        """Give a decode chunk its drafts when their slots fit on free pages (no cached prefix is evicted for them)."""
        draft = self.speculator.draft(chunk.req)
        if draft and self.cache.ensure_pages(chunk.req, 1 + len(draft), may_evict=False):
            chunk.draft = draft

    def _preempt_newest(self, needy: Request) -> bool:
        """Preempt the newest running request; False when the needy one runs alone (it fails)."""
        victim = self.running[-1]
        if victim is needy and len(self.running) == 1:
            self.fail(needy, OutOfPagesError(f"request {needy.request_id} does not fit in the KV pool"))
            return False
        self.preempt(victim)
        return victim is not needy

    def preempt(self, req: Request) -> None:
        """Stop a running request, keep its computed prefix in the tree, requeue it first."""
        self.running.remove(req)
        self.cache.release(req, is_kv_valid=True)
        req.status = RequestStatus.WAITING
        req.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(req)

    def _chunk_size(self, req: Request, budget: int, has_prefill: bool) -> int:
        if self.config.enable_chunked_prefill:
            size = min(req.num_pending, budget)
            # no short straggler: a remainder under 1/TAIL_FRACTION of the budget is taken now, over budget,
            # rather than costing its request (and every batch it lands in) one more step
            if 0 < req.num_pending - size <= self.config.max_batch_tokens // TAIL_FRACTION and size > 0:
                return req.num_pending
            return size
        if req.num_pending <= budget or not has_prefill:
            return req.num_pending
        return 0

    def _schedule_running_prefills(self, chunks: list[ScheduledChunk], budget: int) -> int:
        for req in self.running:
            if req.num_pending <= 1 or budget <= 0:
                continue
            size = self._fit_to_pages(req, self._chunk_size(req, budget, any(c.num_new > 1 for c in chunks)))
            if size > 0 and self.cache.ensure_pages(req, size):
                chunks.append(ScheduledChunk(req, size))
                budget -= size
        return budget

    def _fit_to_pages(self, req: Request, size: int) -> int:
        """Shrink a prefill chunk to the pages that can still be had (chunked prefill only)."""
        if not self.config.enable_chunked_prefill or size <= 1:
            return size
        num_slots = (len(req.pages) + self.cache.num_available_pages()) * self.page_size
        return max(0, min(size, num_slots - req.num_computed))

    def _admit_waiting(self, chunks: list[ScheduledChunk], budget: int) -> None:
        if not self.waiting or budget <= 0 or len(self.running) >= self.config.max_running:
            return
        window = list(self.waiting)[:MAX_POLICY_WINDOW]
        lengths: dict[int, int] = {}

        def match_length(req: Request) -> int:
            if id(req) not in lengths:
                lengths[id(req)] = self.cache.match_length(req)
            return lengths[id(req)]

        if self.config.policy == "fair":
            ordered = self.fair_queue.order(window, match_length, self.running)
        else:
            ordered = order_waiting(self.config.policy, window, match_length, self.page_size)
        producers = [r for r in self.running if r.num_computed < r.num_prompt_tokens]
        for req in ordered:
            if budget <= 0 or len(self.running) >= self.config.max_running:
                break
            if self._is_waiting_for_producer(req, match_length(req), producers):
                continue
            self.cache.admit(req)
            size = self._fit_to_pages(req, self._chunk_size(req, budget, any(c.num_new > 1 for c in chunks)))
            if size <= 0 or not self.cache.ensure_pages(req, size):
                self.cache.release(req, is_kv_valid=False)
                break
            self.waiting.remove(req)
            if req.num_cached_tokens is None:  # first admission (a preempted request keeps its figure)
                req.num_cached_tokens = min(req.num_computed, req.num_prompt_tokens)
                if self.config.policy == "fair":
                    self.fair_queue.charge_cached(req, req.num_cached_tokens)
            req.status = RequestStatus.RUNNING
            self.running.append(req)
            chunks.append(ScheduledChunk(req, size))
            producers.append(req)
            budget -= size

    def share_slots(self) -> None:
        """Under `fair` with every slot taken: free one for the waiting key that runs the fewest requests
        when another key runs at least two more and has been served no less (its fair counter); the
        newest request of that key is preempted (its computed prefix stays in the tree, so it resumes
        where it stopped) and the fair order then admits the waiting key's request first.

        Slots, not only queue order, must be shared: a tenant whose long requests fill every slot would
        otherwise make a newcomer wait for one of them to end. Moving one slot from a key with n+2 or
        more to a key with n never lets the victim's key take it straight back (n+1 vs n+1), so slots
        converge to an even split without thrashing; request weights shape the queue order only.
        """
        if not self.waiting or len(self.running) < self.config.max_running:
            return
        running_per_key = Counter(r.fairness_key for r in self.running)
        hog, most = max(running_per_key.items(), key=lambda item: item[1])
        waiting_keys = {r.fairness_key for r in list(self.waiting)[:MAX_POLICY_WINDOW]}
        needy = min(waiting_keys, key=lambda key: (running_per_key[key], self.fair_queue.counter(key)))
        if most - running_per_key[needy] < 2 or self.fair_queue.counter(needy) > self.fair_queue.counter(hog):
            return
        self.preempt([r for r in self.running if r.fairness_key == hog][-1])

    def _is_waiting_for_producer(self, req: Request, num_cached: int, producers: list[Request]) -> bool:
        """True when a running prefill is computing a long uncached prefix this request shares."""
        if not (self.config.enable_dedup and self.cache.is_enabled):
            return False
        limit = req.prompt_array[: req.match_limit()]
        for producer in producers:
            if producer is req or producer.namespace != req.namespace:
                continue
            shared = common_prefix_len(limit, producer.prompt_array) // self.page_size * self.page_size
            if shared - num_cached >= self.config.dedup_min_tokens:
                return True
        return False

    # ---- after the forward -------------------------------------------
    def postprocess(self, chunks: list[ScheduledChunk], logits: torch.Tensor | None) -> None:
        """Advance every chunk, sample where logits came back (verify drafts), finish and emit
        (engine.token_delivery)."""
        self.delivery.postprocess(chunks, logits)

    # ---- endings ------------------------------------------------------
    def finish(self, req: Request, delta_ids: list[int] | None = None, delta_text: str = "") -> None:
        """Release a request's pages (keeping valid KV in the tree) and send its final output."""
        if req.status is RequestStatus.RUNNING:
            self.running.remove(req)
            self.cache.release(req, is_kv_valid=req.error is None and req.finish_reason != "abort")
        elif req in self.waiting:
            self.waiting.remove(req)
        req.status = RequestStatus.FINISHED
        req.finish_reason = req.finish_reason or "abort"
        self.num_finished += 1
        if req.on_finish is not None:
            req.on_finish(req)
        req.emit(req.final_output(delta_ids or [], delta_text))

    def abort(self, request_id: str) -> bool:
        """Abort a waiting or running request; False if it is unknown or already done."""
        for req in [*self.running, *self.waiting]:
            if req.request_id == request_id:
                req.finish_reason = "abort"
                self.finish(req)
                return True
        return False

    def fail(self, req: Request, error: BaseException) -> None:
        """End one request with an error; its pages go back, the loop carries on."""
        req.error = error
        req.finish_reason = "abort"
        self.finish(req)
