"""EngineCore: what the step thread drives — scheduler, cache, runner — and its counters.

The step is three moves (schedule, forward, postprocess). The engine lock (an
RLock that Engine creates and shares) guards the scheduler, the radix cache and
its pins, the pool's free list and reference counts, and the step and token
counters:

  * the step thread holds it while it applies an inbox command (handle), while it
    schedules and builds the batch, while it postprocesses (emit callbacks run
    there, so they may call back into the engine: the lock is reentrant), and
    while it fails requests or aborts everything at the end of the loop;
  * it does NOT hold it during the forward, while it waits on the inbox, or while
    it sleeps: other threads then take it for stats, pin queries, unpin, pin
    quotas and flush_cache. They may change the tree meanwhile, but never free a
    page the forward writes: a scheduled request holds a lock on its tree path and
    a reference on each of its own pages;
  * make_request runs on the submitting thread without it (it builds a new
    Request and reads no mutable state); the waiting count has its own lock.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future

import torch

from engine.batch_builder import build_forward_batch
from engine.cache_manager import CacheManager
from engine.commands import AbortRequest, AddRequest, CallOnStepThread, Command, Wake
from engine.config import EngineConfig
from engine.detokenizer import Detokenizer
from engine.errors import EngineError
from engine.grammar.compiler import GrammarCompiler
from engine.grammar.state import GrammarState
from engine.host_tier import HostTier, page_bytes_of
from engine.kv_events import open_kv_events
from engine.radix_cache import RadixCache
from engine.request import Request, RequestStatus
from engine.sampler import make_generator
from engine.sampling_params import RequestOutput, SamplingParams
from engine.scheduler import Scheduler

logger = logging.getLogger(__name__)


class EngineCore:
    """Step-thread state (see the module docstring for who holds the lock when).

    On the step thread: handle, step, abort_all and the pin methods. From any thread: make_request,
    count_waiting / num_waiting, and stats (with the engine lock held by the caller).
    """

    def __init__(self, config: EngineConfig, runner, lock: threading.RLock, eos_token_ids: frozenset[int]) -> None:
        self.config = config
        self.runner = runner
        self.pool = runner.pool
        self.cache = RadixCache(self.pool, int(self.pool.num_pages * self.config.max_pinned_fraction))
        self.host_tier = open_host_tier(config, self.pool)
        self.kv_events = open_kv_events(config, self.pool.page_size)  # engine/kv_events.py, None when off
        self.cache.kv_events = self.kv_events
        self.cache_manager = CacheManager(self.pool, self.cache, is_enabled=config.enable_radix_cache,
                                          host_tier=self.host_tier,
                                          shares_generated_kv=runner.generated_kv_is_shareable)
        self.scheduler = Scheduler(config, self.cache_manager)
        self.tokenizer = runner.loaded_model.tokenizer
        self.eos_token_ids = eos_token_ids
        self.grammar_compiler = GrammarCompiler(self.tokenizer, eos_token_ids) if self.tokenizer is not None else None
        self._lock = lock
        self._waiting_lock = threading.Lock()
        self._num_waiting = 0
        self.num_steps = 0
        self.num_prefill_tokens = 0
        self.num_decode_tokens = 0
        self.forward_s = 0.0

    # ---- requests -----------------------------------------------------
    def make_request(self, request_id: str, token_ids: list[int], params: SamplingParams, namespace: str,
                     emit, *, is_counted: bool = True, fairness_key: str | None = None, weight: float = 1.0,
                     queue_timeout_s: float | None = None, prefix_pins=None) -> Request:
        """A new Request; its queue timeout is the smaller of queue_timeout_s and config.max_queue_wait_s
        (none for uncounted internal requests such as pin prefills); `prefix_pins` (a PrefixPins) are
        leased as its prefill commits them (CacheManager.hold_prefixes)."""
        detokenizer = Detokenizer(self.tokenizer, token_ids, params.stop) if self.tokenizer is not None else None
        limit = self.config.max_queue_wait_s
        timeout = (min(limit, queue_timeout_s) if queue_timeout_s is not None else limit) if is_counted else None
        req = Request(request_id, token_ids, params, namespace, detokenizer=detokenizer,
                      generator=make_generator(params.seed), emit=emit, eos_token_ids=self.eos_token_ids,
                      grammar=self.make_grammar_state(params), fairness_key=fairness_key, weight=weight,
                      queue_timeout_s=timeout)
        req.is_counted_waiting = is_counted
        page_size = self.pool.page_size
        pending = sorted((n - n % page_size, ttl_s) for n, ttl_s in (prefix_pins.prefixes if prefix_pins else ()))
        if any(n for n, _ in pending):
            req.prefix_pins, req.pending_pins = prefix_pins, [(n, ttl_s) for n, ttl_s in pending if n]
        req.emit = self._wrap_emit(req, emit)
        return req

    def make_grammar_state(self, params: SamplingParams) -> GrammarState | None:
        """The request's matcher, compiled (or copied from the cache) on the calling thread; GrammarError if bad."""
        if params.grammar is None:
            return None
        if self.grammar_compiler is None:
            raise EngineError("grammars need a tokenizer (this model runner has none)")
        matcher = self.grammar_compiler.compile(params.grammar)
        return GrammarState(params.grammar, matcher, self.grammar_compiler.ll_tokenizer)

    def _wrap_emit(self, req: Request, emit):
        def emit_once_safe(output: RequestOutput) -> None:
            if output.is_finished:
                self._uncount(req)
            try:
                emit(output)
            except Exception:  # a broken consumer must not take the loop down
                logger.exception("emit failed for request %s", req.request_id)
        return emit_once_safe

    def count_waiting(self, delta: int) -> None:
        with self._waiting_lock:
            self._num_waiting += delta

    @property
    def num_waiting(self) -> int:
        return self._num_waiting

    def _uncount(self, req: Request) -> None:
        if req.is_counted_waiting:
            req.is_counted_waiting = False
            self.count_waiting(-1)

    @property
    def has_work(self) -> bool:
        return self.scheduler.has_work

    def handle(self, command: Command) -> None:
        """Apply one inbox command (engine.commands); the caller holds the engine lock."""
        match command:
            case AddRequest(request):
                self.scheduler.add_request(request)
            case AbortRequest(request_id):
                self.scheduler.abort(request_id)
            case CallOnStepThread(fn):
                fn()
            case Wake():
                pass
            case _:
                raise TypeError(f"unknown engine command {command!r} (of type {type(command).__name__})")

    # ---- the step -----------------------------------------------------
    def step(self) -> bool:
        """Run one forward over the scheduled chunks; False when nothing could be scheduled."""
        with self._lock:
            try:
                self.cache.expire_pins()  # timed pins whose time is up become ordinary cache before pages are sought
                chunks = self.scheduler.schedule()
                for chunk in chunks:
                    self._uncount(chunk.req)
                batch = build_forward_batch(chunks, self.pool.page_size, self.runner.device) if chunks else None
            except Exception as error:  # noqa: BLE001 - the loop must survive; fail what was planned
                logger.exception("scheduling failed")
                self._fail_running(error)
                return False
        if batch is None:
            return False
        started = time.perf_counter()
        try:
            logits = self.runner.forward(batch)
        except Exception:  # noqa: BLE001 - find the culprit; the others go on
            logger.exception("forward failed; retrying its %d sequences one by one", len(chunks))
            chunks, logits = self._forward_one_by_one(chunks)
        seconds = time.perf_counter() - started
        self.forward_s += seconds
        if self.host_tier is not None and all(c.num_new > 1 for c in chunks):  # a prefill-only step
            self.host_tier.policy.observe_prefill(sum(c.num_new for c in chunks), seconds)
        with self._lock:
            self._count_step(chunks)
            try:
                self.scheduler.postprocess(chunks, logits)
            except Exception as error:  # noqa: BLE001
                logger.exception("postprocess failed")
                self._fail_running(error, [c.req for c in chunks])
        return True

    def _forward_one_by_one(self, chunks):
        """Rerun each chunk alone (it rewrites the same slots); fail only the chunks that still raise."""
        survivors, rows = [], []
        for chunk in chunks:
            try:
                logits = self.runner.forward(build_forward_batch([chunk], self.pool.page_size, self.runner.device))
            except Exception as error:  # noqa: BLE001
                with self._lock:
                    self.scheduler.fail(chunk.req, error)
                continue
            survivors.append(chunk)
            if chunk.needs_logits:
                rows.append(logits)
        return survivors, (torch.cat(rows) if rows else None)

    def _count_step(self, chunks) -> None:
        self.num_steps += 1
        for chunk in chunks:
            is_decode = chunk.num_new == 1 and chunk.is_last and chunk.req.num_outputs > 0
            if is_decode:
                self.num_decode_tokens += 1
            else:
                self.num_prefill_tokens += chunk.num_new

    def _fail_running(self, error: BaseException, reqs: list[Request] | None = None) -> None:
        for req in list(reqs if reqs is not None else self.scheduler.running):
            if req.status is not RequestStatus.FINISHED:
                try:
                    self.scheduler.fail(req, error)
                except Exception:  # noqa: BLE001 - keep failing the others
                    logger.exception("failing request %s", req.request_id)

    def abort_all(self) -> None:
        for req in [*self.scheduler.running, *self.scheduler.waiting]:
            self.scheduler.abort(req.request_id)

    # ---- pins ---------------------------------------------------------
    def start_pin(self, namespace: str, token_ids: list[int], future: Future) -> None:
        """Pin the page-aligned prefix of token_ids, prefilling it first when not cached."""
        if not self.config.enable_radix_cache:
            future.set_exception(EngineError("pins need the radix cache (enable_radix_cache=False)"))
            return
        aligned = len(token_ids) // self.pool.page_size * self.pool.page_size
        if aligned == 0:
            future.set_exception(ValueError(f"a pin needs at least one full page ({self.pool.page_size} tokens)"))
            return
        prefix = token_ids[:aligned]
        if self.cache.match_prefix(namespace, prefix).length >= aligned:
            self._finish_pin(namespace, prefix, future)
            return
        req = self.make_request(f"pin-{id(future):x}", prefix, SamplingParams(max_tokens=0), namespace,
                                lambda output: None, is_counted=False)
        req.on_finish = lambda done: self._on_pin_prefilled(done, namespace, prefix, future)
        self.scheduler.add_request(req)

    def _on_pin_prefilled(self, req: Request, namespace: str, prefix: list[int], future: Future) -> None:
        if req.error is not None or req.finish_reason == "abort":
            future.set_exception(req.error or EngineError("the pin's prefill was aborted"))
            return
        self._finish_pin(namespace, prefix, future)

    def _finish_pin(self, namespace: str, prefix: list[int], future: Future) -> None:
        try:
            pin_id = self.cache.pin(namespace, prefix)
            self.cache_manager.write_through(namespace, prefix)  # a pinned prefix is in both tiers
            future.set_result(pin_id)
        except Exception as error:  # noqa: BLE001 - QuotaExceededError etc. go to the caller
            future.set_exception(error)

    # ---- stats --------------------------------------------------------
    def stats(self) -> dict:
        return {
            "policy": self.config.policy,
            "enable_radix_cache": self.config.enable_radix_cache,
            "num_waiting": len(self.scheduler.waiting),
            "num_running": len(self.scheduler.running),
            "num_finished": self.scheduler.num_finished,
            "num_preemptions": self.scheduler.num_preemptions,
            "num_queue_timeouts": self.scheduler.num_queue_timeouts,
            "num_steps": self.num_steps,
            "num_prefill_tokens": self.num_prefill_tokens,
            "num_decode_tokens": self.num_decode_tokens,
            "forward_s": round(self.forward_s, 3),
            "pool": {"num_pages": self.pool.num_pages, "page_size": self.pool.page_size,
                     "num_free_pages": self.pool.num_free_pages},
            "cache": self.cache.stats(),
            "host_tier": self.host_tier.stats() if self.host_tier is not None else None,
            "speculation": self.scheduler.speculator.stats() if self.scheduler.speculator is not None else None,
        }

    def close(self) -> None:
        """Detach from the host tier (the engine that created it also removes it); stop publishing KV events."""
        if self.kv_events is not None:
            self.cache.kv_events = None
            self.kv_events.close()
        if self.host_tier is not None:
            self.host_tier.close()
            self.host_tier = self.cache_manager.host_tier = None
            self.cache.on_evict = None


def open_host_tier(config: EngineConfig, pool) -> HostTier | None:
    if not (config.is_host_tier_enabled and config.enable_radix_cache and pool.k_cache):
        return None
    page_bytes = page_bytes_of(pool)
    tier = HostTier.open(pool, name=config.host_tier_name, num_pages=config.num_host_tier_pages(page_bytes),
                         lease_s=config.host_tier_lease_s)
    logger.info("host tier %s: %d pages of %d tokens (%d bytes each)", tier.store.name, tier.store.num_pages,
                pool.page_size, page_bytes)
    return tier
