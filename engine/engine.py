"""Engine: the public library API over one step thread (a background one, or the caller's: run_here).

Threads: callers (asyncio or plain threads) only validate, build a Request
and put a command (engine.commands) on the inbox; the step thread alone
schedules, runs the forward and postprocesses. Outputs go back through each
request's emit callback (loop.call_soon_threadsafe for asyncio callers).
Short cache queries and changes from other threads (stats, pin_info, unpin,
set_pin_quota, flush_cache) take self._lock, which the step thread holds while
it applies commands, schedules and postprocesses, and releases during the
forward and while it waits for work (engine.engine_core says what the lock
guards).

The loop never dies on a bad request: when a batched forward raises, its
sequences are rerun one by one and only those that still raise are failed
(the error goes to that request, its pages go back); the loop goes on.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future

from engine.commands import AbortRequest, AddRequest, CallOnStepThread, Wake
from engine.config import EngineConfig
from engine.engine_core import EngineCore
from engine.errors import EngineOverloadedError, PromptTooLongError
from engine.output_streams import AsyncOutputs, FinalOutput
from engine.radix_pins import PrefixPins, check_prefix_pins
from engine.sampling_params import RequestOutput, SamplingParams

logger = logging.getLogger(__name__)


class Engine:
    """A radix-cached LLM engine: start(), generate()/generate_sync(), abort(), pin(), shutdown()."""

    def __init__(self, config: EngineConfig | None = None, *, runner=None) -> None:
        self.config = config or EngineConfig()
        if runner is None:
            from engine.models.gguf_cache import model_cache_root
            from engine.runner import ModelRunner

            runner = ModelRunner.from_spec(
                self.config.model, dtype=self.config.dtype, device=self.config.device,
                num_pages=self.config.num_kv_pages, page_size=self.config.page_size,
                quantization=self.config.quantization, prefer=self.config.prefer,
                cache_dir=model_cache_root(self.config.cache_dir), native=self.config.native_kernels,
            )
        self.runner = runner
        loaded = runner.loaded_model
        self.tokenizer = loaded.tokenizer
        self.model_id = loaded.model_id
        self.max_context = min(self.config.max_context or loaded.max_context, loaded.max_context or 10**9)
        self._lock = threading.RLock()
        self._core = EngineCore(self.config, runner, self._lock, frozenset(loaded.eos_token_ids))
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None  # the background step thread start() made
        self._loop_thread: threading.Thread | None = None  # whichever thread runs the loop now
        self._is_stopping = threading.Event()
        self._loop_done = threading.Event()

    # ---- lifecycle ----------------------------------------------------
    def start(self) -> "Engine":
        """Run the step loop on a background thread (run_here runs it on the calling thread instead)."""
        if not self.is_running:
            self._is_stopping.clear()
            self._loop_done.clear()
            self._thread = threading.Thread(target=self._run_loop, name="radixgate-engine-step", daemon=True)
            self._loop_thread = self._thread
            self._thread.start()
        return self

    def run_here(self, until: threading.Event | None = None) -> None:
        """Run the step loop on the calling thread until shutdown() is called (from any thread, or an emit)
        or ``until`` is set (checked at least every half second).

        Meant for the process's main thread when it has nothing else to do (`radixgate serve`, the
        benches). torch's CPU threads are OpenMP threads, and libgomp cuts its spin-waiting short
        as soon as more threads use it than there are cores, which any thread but the main one
        does, so CPU forwards run slower on a side thread (docs/performance.md).
        """
        if self.is_running:
            raise RuntimeError("the engine's step loop is already running")
        self._is_stopping.clear()
        self._loop_done.clear()
        self._loop_thread = threading.current_thread()
        self._run_loop(until)

    @property
    def is_running(self) -> bool:
        return self._loop_thread is not None

    def shutdown(self) -> None:
        """Stop the step loop (pending requests are aborted); returns once it stopped, unless called on it."""
        if self._loop_thread is None:
            if self._thread is not None:  # a background loop that already ended
                self._thread.join()
                self._thread = None
            return
        self._is_stopping.set()
        self._inbox.put(Wake())
        if threading.current_thread() is self._loop_thread:
            return  # from an emit callback: the loop stops after this step
        self._loop_done.wait()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> "Engine":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.close()

    def close(self) -> None:
        """Release what outlives the step loop (the host tier's shared memory); call after shutdown()."""
        with self._lock:
            self._core.close()

    @property
    def pool(self):
        return self._core.pool

    @property
    def cache(self):
        return self._core.cache

    # ---- submission ---------------------------------------------------
    def submit(
        self,
        token_ids: list[int],
        params: SamplingParams | None,
        emit: Callable[[RequestOutput], None],
        *,
        namespace: str | None = None,
        request_id: str | None = None,
        fairness_key: str | None = None,
        weight: float = 1.0,
        queue_timeout_s: float | None = None,
        prefix_pins: PrefixPins | None = None,
    ) -> str:
        """Queue one request; emit(output) is called on the step thread. Returns the request id.

        fairness_key names whose share of the engine the request counts against under the "fair"
        policy (default: its namespace; the gateway passes the tenant), weight that key's share
        (> 0; equal by default). queue_timeout_s may shorten, never lengthen, config.max_queue_wait_s:
        a request not scheduled by then ends with QueueTimeoutError, holding nothing. prefix_pins: prompt
        prefixes to hold for a time once computed (engine.radix_pins.PrefixPins; never fails the request).
        """
        params = params or SamplingParams()
        token_ids = [int(t) for t in token_ids]
        self._validate(token_ids, params)
        if weight <= 0:
            raise ValueError(f"weight must be > 0, got {weight}")
        if queue_timeout_s is not None and not queue_timeout_s > 0:
            raise ValueError(f"queue_timeout_s must be > 0, got {queue_timeout_s}")
        check_prefix_pins(prefix_pins, len(token_ids))
        request_id = request_id or uuid.uuid4().hex
        req = self._core.make_request(request_id, token_ids, params, namespace or self.config.default_namespace, emit,
                                      fairness_key=fairness_key, weight=weight, queue_timeout_s=queue_timeout_s,
                                      prefix_pins=prefix_pins)
        self._core.count_waiting(+1)
        self._inbox.put(AddRequest(req))
        return request_id

    def compile_grammar(self, grammar) -> None:
        """Compile `grammar` into the engine's grammar cache now (GrammarError if it does not compile).

        submit compiles on the calling thread anyway; callers on an event loop call this first from a
        worker thread, so submit then only copies the cached matcher.
        """
        self._core.make_grammar_state(SamplingParams(grammar=grammar))

    def _validate(self, token_ids: list[int], params: SamplingParams) -> None:
        if not token_ids:
            raise ValueError("the prompt has no tokens")
        total = len(token_ids) + params.max_tokens
        if total > self.max_context:
            raise PromptTooLongError(
                f"prompt ({len(token_ids)} tokens) + max_tokens ({params.max_tokens}) = {total} "
                f"exceeds the model's context of {self.max_context} tokens")
        if -(-total // self.config.page_size) > self.pool.num_pages:
            raise PromptTooLongError(f"{total} tokens do not fit the KV pool of {self.pool.num_pages} pages")
        if self._core.num_waiting >= self.config.max_queue:
            raise EngineOverloadedError(f"the waiting queue is full ({self.config.max_queue} requests)")

    def generate(
        self, token_ids: list[int], params: SamplingParams | None = None, namespace: str | None = None,
        request_id: str | None = None, **scheduling,
    ) -> AsyncIterator[RequestOutput]:
        """Submit now (validation errors raise here) and stream outputs; the last carries usage.

        Leaving the iteration early (client gone, task cancelled) aborts the request. `scheduling`:
        submit's fairness_key, weight and queue_timeout_s.
        """
        outputs = AsyncOutputs(self.abort)
        request_id = self.submit(token_ids, params, outputs.emit, namespace=namespace, request_id=request_id,
                                 **scheduling)
        return outputs.stream(request_id)

    def generate_sync(
        self, token_ids: list[int], params: SamplingParams | None = None, namespace: str | None = None,
        request_id: str | None = None, timeout: float | None = None, **scheduling,
    ) -> RequestOutput:
        """Block until the request finishes; the final output has output_token_ids, output_text and usage."""
        final = FinalOutput()
        self.submit(token_ids, params, final.emit, namespace=namespace, request_id=request_id, **scheduling)
        return final.result(timeout)

    def abort(self, request_id: str) -> None:
        """Abort a request wherever it is; everything it held goes back. Unknown ids are ignored."""
        self._inbox.put(AbortRequest(request_id))

    # ---- pins ---------------------------------------------------------
    async def pin(self, namespace: str, token_ids: list[int]) -> str:
        """Prefill token_ids in namespace if needed, then pin the cached path; returns the pin id."""
        return await asyncio.wrap_future(self.pin_future(namespace, token_ids))

    def pin_future(self, namespace: str, token_ids: list[int]) -> Future:
        future: Future = Future()
        token_ids = [int(t) for t in token_ids]
        self._validate(token_ids, SamplingParams(max_tokens=0))
        self._inbox.put(CallOnStepThread(lambda: self._core.start_pin(namespace, token_ids, future)))
        return future

    def unpin(self, pin_id: str) -> None:
        with self._lock:
            self.cache.unpin(pin_id)

    def set_pin_quota(self, namespace: str, num_tokens: int) -> None:
        with self._lock:
            self.cache.set_pin_quota(namespace, num_tokens)

    def set_pin_capacity(self, num_pages: int | None) -> None:
        """Cap the pages all pins hold together (None: no cap); existing pins are kept."""
        with self._lock:
            self.cache.max_pinned_pages = num_pages

    def pin_info(self, pin_id: str) -> dict:
        with self._lock:
            return self.cache.pin_info(pin_id)

    # ---- introspection ------------------------------------------------
    def stats(self) -> dict:
        with self._lock:
            self.cache.expire_pins()
            return self._core.stats() | {"model_id": self.model_id, "is_running": self.is_running}

    def kv_event_source(self) -> dict | None:
        """Where this engine publishes its KV events (engine/kv_events.py), or None when it does not."""
        publisher = self._core.kv_events
        return publisher.describe() if publisher is not None else None

    def flush_cache(self) -> int:
        """Evict every unlocked, unpinned tree page; returns pages freed (benches and leak checks)."""
        with self._lock:
            return self.cache.evict(self.cache.num_evictable_pages)

    # ---- step thread --------------------------------------------------
    def _run_loop(self, until: threading.Event | None = None) -> None:
        try:
            while not self._is_stopping.is_set() and not (until is not None and until.is_set()):
                self._drain_inbox(block=not self._core.has_work)
                if self._is_stopping.is_set():
                    break
                if self._core.has_work and not self._core.step():
                    time.sleep(0.002)  # nothing fits this step (all waiting on pages / producers)
        finally:  # stopped, or interrupted (Ctrl-C on run_here): nothing is left waiting
            with self._lock:
                self._core.abort_all()
            self._loop_thread = None
            self._loop_done.set()

    def _drain_inbox(self, *, block: bool) -> None:
        try:
            command = self._inbox.get(timeout=0.5) if block else self._inbox.get_nowait()
        except queue.Empty:
            return
        while True:
            with self._lock:
                self._core.handle(command)
            try:
                command = self._inbox.get_nowait()
            except queue.Empty:
                return
