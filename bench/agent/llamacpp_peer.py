"""llama.cpp as a peer of bench agent: the plain rows through llama-cpp-python, in a child process.

The child drives ``Llama.create_completion`` on each row's prompt tokens (the model's chat template,
bench.agent.plain), streamed, greedy, the row's own max_tokens, stopping at end of sequence: the
path llama-cpp-python's own server takes. It reuses the longest common prefix of the previous request's
context, and with ``ram_cache`` also keeps states in a ``LlamaRAMCache`` (the server's ``cache: true``)
so that a tenant's prefix survives the other tenants' requests in between. Prefill tokens are llama.cpp's
own count of prompt tokens it evaluated. It runs under bench.llamacpp's crash fallback.
"""

from __future__ import annotations

import time

from bench.llamacpp import NAME, load_llama, run_with_fallback
from bench.progress import Progress

RAM_CACHE_BYTES = 2 << 30  # llama-cpp-python's default capacity


def run_llamacpp_agent(gguf_path: str | None, prompts: list[list[int]], max_tokens: list[int], *, num_threads: int,
                       ram_cache: bool = True, progress: Progress | None = None) -> dict:
    """{"name", "wall_s", "ttft_s", "prefill_tokens", "answers"[, "note"]} or {"name", "error"}."""
    return run_with_fallback(gguf_path, _serve, (prompts, max(max_tokens), num_threads), (max_tokens, ram_cache),
                             progress=progress)


def _prompt_tokens_evaluated(llm) -> int:
    import llama_cpp

    return int(llama_cpp.llama_perf_context(llm._ctx.ctx).n_p_eval)


def _serve(sender, gguf_path: str, prompts: list[list[int]], _max_new: int, num_threads: int, extra_buffers: bool,
           max_tokens: list[int], ram_cache: bool) -> None:
    import llama_cpp

    llm = load_llama(gguf_path, num_threads, extra_buffers)
    for _ in llm.create_completion(prompts[0][:32], max_tokens=2, temperature=0.0, top_k=1, stream=True):
        pass  # untimed warm-up
    if ram_cache:
        llm.set_cache(llama_cpp.LlamaRAMCache(capacity_bytes=RAM_CACHE_BYTES))
    llm.reset()
    evaluated_before = _prompt_tokens_evaluated(llm)
    ttfts, answers = [], []
    started = time.perf_counter()
    for index, (prompt, limit) in enumerate(zip(prompts, max_tokens)):
        sent, first, parts = time.perf_counter(), None, []
        for chunk in llm.create_completion(prompt, max_tokens=limit, temperature=0.0, top_k=1, stream=True):
            text = chunk["choices"][0]["text"]
            if text:
                first = first or time.perf_counter()
                parts.append(text)
        ttfts.append((first or time.perf_counter()) - sent)
        answers.append("".join(parts))
        sender.send(("progress", index + 1))
    sender.send(("result", {"name": NAME, "wall_s": time.perf_counter() - started, "ttft_s": ttfts,
                            "prefill_tokens": _prompt_tokens_evaluated(llm) - evaluated_before, "answers": answers}))
