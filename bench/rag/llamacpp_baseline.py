"""The llama.cpp baseline of bench rag: llama-cpp-python over the same GGUF, in a child process.

llama.cpp is native code that can crash the process it runs in: its weight
repacking (the "extra buffer types" that repack quantized weights for the
CPU's matrix instructions) can segfault in the first decode on some CPUs
(llama.cpp issue #20824). So the baseline runs in a spawned child; when the
child dies by a signal, it runs once more with the extra buffer types off
(``use_extra_bufts = False``), the fastest configuration that works there, and
the result says so. The bench's own results are never lost to a baseline.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import time
from collections.abc import Callable

from bench.progress import Progress
from bench.rag import BASELINE_WARMUP_TOKENS

NAME = "llama.cpp"
# a GGUF whose run crashed with the extra buffer types, and the signal: later runs (--repeat) skip straight to
# the configuration that works instead of crashing a child and reloading the model each time
_CRASHES_WITH_EXTRA_BUFFERS: dict[str, int] = {}


def run_llamacpp(gguf_path: str | None, prompts: list[list[int]], max_new_tokens: int, *, num_threads: int,
                 progress: Progress | None = None) -> dict:
    """Serial greedy generation with llama.cpp's prompt-prefix reuse; {"name", "wall_s", "outputs"[, "note"]}
    or {"name", "error"}."""
    return run_with_fallback(gguf_path, prompts, max_new_tokens, num_threads, progress)


def run_with_fallback(gguf_path: str | None, prompts: list[list[int]], max_new_tokens: int, num_threads: int,
                      progress: Progress | None, target: Callable | None = None, extra: tuple = ()) -> dict:
    """``target`` (default: the serial generation) in a child, again without the extra buffer types if the
    child dies by a signal; its result dict, or {"name", "error"}."""
    if importlib.util.find_spec("llama_cpp") is None:
        return {"name": NAME, "error": "llama-cpp-python is not installed (pip install llama-cpp-python)"}
    if gguf_path is None:
        return {"name": NAME, "error": "the model is not a GGUF file"}
    args = (gguf_path, prompts, max_new_tokens, num_threads)
    crashed = _CRASHES_WITH_EXTRA_BUFFERS.get(gguf_path)
    if crashed is None:
        result = _run_child(*args, extra_buffers=True, progress=progress, target=target, extra=extra)
        if "signal" not in result:
            return result
        crashed = _CRASHES_WITH_EXTRA_BUFFERS[gguf_path] = result["signal"]
    result = _run_child(*args, extra_buffers=False, progress=progress, target=target, extra=extra)
    if "signal" in result:
        return {"name": NAME, "error": f"llama.cpp crashed (signal {result['signal']}), with and without its "
                                       "weight-repacking buffer types"}
    result["note"] = (f"llama.cpp crashed (signal {crashed}) with its weight-repacking buffer types "
                      "(llama.cpp issue #20824); ran with use_extra_bufts=False")
    return result


def _run_child(gguf_path: str, prompts: list[list[int]], max_new_tokens: int, num_threads: int, *,
               extra_buffers: bool, progress: Progress | None, target: Callable | None = None,
               extra: tuple = ()) -> dict:
    """Generate in a spawned child (``target``, default _child_main, called with the sending end, these
    arguments, ``extra_buffers`` and ``extra``); progress arrives as messages. {"signal": n} when the child
    died by a signal."""
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    args = (sender, gguf_path, prompts, max_new_tokens, num_threads, extra_buffers, *extra)
    child = context.Process(target=target or _child_main, args=args, daemon=True)
    child.start()
    sender.close()  # the child holds the only sending end: its death ends recv() with EOFError
    result: dict | None = None
    try:
        while result is None:
            kind, payload = receiver.recv()
            if kind == "progress" and progress:
                progress(NAME, payload)
            elif kind == "result":
                result = payload
            elif kind == "error":
                result = {"name": NAME, "error": payload}
    except EOFError:
        pass
    child.join()
    if result is not None:
        return result
    if child.exitcode is not None and child.exitcode < 0:
        return {"signal": -child.exitcode}
    return {"name": NAME, "error": f"the llama.cpp child exited with code {child.exitcode} and no result"}


def _child_main(sender, *args) -> None:
    try:
        _generate(sender, *args)
    except Exception as error:  # noqa: BLE001 - reported to the parent as the baseline's error
        sender.send(("error", f"{type(error).__name__}: {error}"))


def load_llama(gguf_path: str, num_threads: int, extra_buffers: bool, **kwargs):
    """A llama_cpp.Llama over the GGUF (in the child), without the extra buffer types when told."""
    import llama_cpp
    from llama_cpp import llama_cpp as bindings

    if not extra_buffers:
        default_params = bindings.llama_model_default_params

        def params_without_extra_buffers():
            params = default_params()
            params.use_extra_bufts = False
            return params

        bindings.llama_model_default_params = params_without_extra_buffers  # Llama() reads it from there
    return llama_cpp.Llama(model_path=gguf_path, n_ctx=4096, n_threads=num_threads, verbose=False, **kwargs)


def _generate(sender, gguf_path: str, prompts: list[list[int]], max_new_tokens: int, num_threads: int,
              extra_buffers: bool) -> None:
    llm = load_llama(gguf_path, num_threads, extra_buffers)
    # untimed warm-up on the first prompt's first BASELINE_WARMUP_TOKENS tokens (its prefix reuse keeps those few)
    for count, _ in enumerate(llm.generate(prompts[0][:BASELINE_WARMUP_TOKENS], temp=0.0, top_k=1), start=1):
        if count >= 2:
            break
    started = time.perf_counter()
    outputs = []
    for index, prompt in enumerate(prompts):
        tokens = []
        # reset=True (the default) is the mode that keeps the longest common prefix of the last context
        for token in llm.generate(prompt, temp=0.0, top_k=1):
            tokens.append(int(token))
            if len(tokens) >= max_new_tokens:
                break
        outputs.append(tokens)
        sender.send(("progress", index + 1))
    sender.send(("result", {"name": NAME, "wall_s": time.perf_counter() - started, "outputs": outputs}))
