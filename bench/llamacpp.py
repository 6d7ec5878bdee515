"""llama.cpp (llama-cpp-python) in a spawned child process: the plumbing every llama.cpp peer of the benches shares.

llama.cpp is native code that can crash the process it runs in: its weight repacking (the "extra buffer
types" that repack quantized weights for the CPU's matrix instructions) can segfault in the first decode
on some CPUs (llama.cpp issue #20824). So a peer's work runs in a spawned child; when the child dies by a
signal, it runs once more with the extra buffer types off (``use_extra_bufts = False``), the fastest
configuration that works there, and the result says so in its "note". A bench's own results are never
lost to a peer.

The child calls ``work(sender, gguf_path, *args, extra_buffers, *extra)``; ``work`` must be a module-level
function (spawn pickles it by name). It sends ``("progress", n)`` as it goes and one ``("result", dict)``
at the end; an exception it raises reaches the parent as {"name": NAME, "error": "Type: message"}.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
from collections.abc import Callable

from bench.progress import Progress

NAME = "llama.cpp"
NOT_INSTALLED = "llama-cpp-python is not installed (pip install 'radixgate[bench-llamacpp]')"
# a GGUF whose run crashed with the extra buffer types, and the signal: later runs (--repeat) skip straight to
# the configuration that works instead of crashing a child and reloading the model each time
_CRASHES_WITH_EXTRA_BUFFERS: dict[str, int] = {}


def run_with_fallback(gguf_path: str | None, work: Callable, args: tuple = (), extra: tuple = (), *,
                      progress: Progress | None = None) -> dict:
    """``work`` in a child (see the module docstring), again without the extra buffer types if the child dies
    by a signal; the child's result dict (with a "note" after a fallback), or {"name", "error"}."""
    if importlib.util.find_spec("llama_cpp") is None:
        return {"name": NAME, "error": NOT_INSTALLED}
    if gguf_path is None:
        return {"name": NAME, "error": "the model is not a GGUF file"}
    crashed = _CRASHES_WITH_EXTRA_BUFFERS.get(gguf_path)
    if crashed is None:
        result = run_child(work, (gguf_path, *args, True, *extra), progress=progress)
        if "signal" not in result:
            return result
        crashed = _CRASHES_WITH_EXTRA_BUFFERS[gguf_path] = result["signal"]
    result = run_child(work, (gguf_path, *args, False, *extra), progress=progress)
    if "signal" in result:
        return {"name": NAME, "error": f"llama.cpp crashed (signal {result['signal']}), with and without its "
                                       "weight-repacking buffer types"}
    result["note"] = (f"llama.cpp crashed (signal {crashed}) with its weight-repacking buffer types "
                      "(llama.cpp issue #20824); ran with use_extra_bufts=False")
    return result


def run_child(work: Callable, args: tuple, *, progress: Progress | None = None) -> dict:
    """``work(sender, *args)`` in a spawned child; progress messages go to ``progress(NAME, n)``. The child's
    result or error dict, or {"signal": n} when the child died by a signal."""
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=child_main, args=(sender, work, *args), daemon=True)
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


def child_main(sender, work: Callable, *args) -> None:
    """The child's entry point: runs ``work(sender, *args)``; an exception is sent as ("error", text)."""
    try:
        work(sender, *args)
    except Exception as error:  # noqa: BLE001 - reported to the parent as the peer's error
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


def model_params(extra_buffers: bool):
    """llama.cpp's default model parameters for the low-level API (in the child), without the extra buffer
    types when told."""
    import llama_cpp

    params = llama_cpp.llama_model_default_params()
    if not extra_buffers:
        params.use_extra_bufts = False
    return params
