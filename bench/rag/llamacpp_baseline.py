"""The llama.cpp baseline of bench rag: llama-cpp-python over the same GGUF, serial greedy generation with
llama.cpp's prompt-prefix reuse, in a child process (bench.llamacpp: a crash is retried without the
weight-repacking buffer types, and the result says so).
"""

from __future__ import annotations

import time

from bench.llamacpp import NAME, load_llama, run_with_fallback
from bench.progress import Progress
from bench.rag import BASELINE_WARMUP_TOKENS


def run_llamacpp(gguf_path: str | None, prompts: list[list[int]], max_new_tokens: int, *, num_threads: int,
                 progress: Progress | None = None) -> dict:
    """Serial greedy generation with llama.cpp's prompt-prefix reuse; {"name", "wall_s", "outputs"[, "note"]}
    or {"name", "error"}."""
    return run_with_fallback(gguf_path, _generate, (prompts, max_new_tokens, num_threads), progress=progress)


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
