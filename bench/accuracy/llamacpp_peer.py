"""llama.cpp as a candidate of bench accuracy: the same GGUF through llama-cpp-python, in a child process.

llama.cpp runs the GGUF as stored (the default SmolLM2: Q4_1 layers, a Q8_0 head) and rounds each row of
activations to 8 bits before its quantized products, so its figures sit beside radixgate's w4a8 (the same
arithmetic). Each prompt is teacher-forced once with every position's logits kept (``logits_all``), then
generates its own greedy tokens; the child runs under bench.llamacpp's crash fallback (again without the
weight-repacking buffer types if it dies).
"""

from __future__ import annotations

import torch

from bench.llamacpp import NAME, load_llama, run_with_fallback
from bench.progress import Progress


def llamacpp_candidate(gguf_path: str | None, reference, num_threads: int,
                       progress: Progress | None = None) -> dict:
    """{"forced_logits": (num_prompts, num_tokens, vocab) float32, "tokens": greedy tokens per prompt[, "note"]}
    or {"name", "error"}."""
    num_tokens = len(reference.tokens[0])
    result = run_with_fallback(gguf_path, _measure, (reference.prompts, num_tokens, num_threads), (reference.tokens,),
                               progress=progress)
    if "error" in result:
        return result
    result["forced_logits"] = torch.stack([torch.from_numpy(rows) for rows in result["forced_logits"]])
    return result


def _measure(sender, gguf_path: str, prompts: list[list[int]], num_tokens: int, num_threads: int,
             extra_buffers: bool, forced: list[list[int]]) -> None:
    import numpy as np

    llm = load_llama(gguf_path, num_threads, extra_buffers, logits_all=True)
    forced_logits, tokens = [], []
    for index, (prompt, teacher) in enumerate(zip(prompts, forced)):
        llm.reset()
        llm.eval(prompt + teacher[:-1])
        first = len(prompt) - 1  # the row whose logits predict teacher[0]
        forced_logits.append(np.array(llm.scores[first : first + len(teacher)], dtype=np.float32))
        own = []
        llm.reset()
        for token in llm.generate(prompt, temp=0.0, top_k=1, reset=True):
            own.append(int(token))
            if len(own) >= num_tokens:
                break
        tokens.append(own)
        sender.send(("progress", index + 1))
    sender.send(("result", {"name": NAME, "forced_logits": forced_logits, "tokens": tokens}))
