"""Baselines for bench rag: transformers `generate` and llama-cpp-python, run serially.

transformers runs twice: from scratch (every prompt prefilled in full), and
with prefix reuse (the shared prefix is prefilled once into a DynamicCache
that each request starts from a deep copy of). llama-cpp-python is an
optional extra: when it is not importable the result says so.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable

import torch

from engine.bench.workloads import RagWorkload

Progress = Callable[[str, int], None]


@torch.inference_mode()
def run_hf(loaded_model, workload: RagWorkload, *, dtype: torch.dtype = torch.float32, reuse_prefix: bool,
           progress: Progress | None = None) -> dict:
    """Serial transformers generate over the workload; wall time and greedy outputs."""
    model = loaded_model.build_hf_model(dtype)
    new_tokens = workload.max_new_tokens
    label = "hf prefix-reuse" if reuse_prefix else "hf from scratch"
    prefix_len = min(workload.num_prefix_tokens, min(len(p) for p in workload.prompts) - 1)
    started = time.perf_counter()
    prefix_cache = None
    if reuse_prefix:
        prefix_ids = torch.tensor([workload.prompts[0][:prefix_len]])
        prefix_cache = model(prefix_ids, use_cache=True).past_key_values
    outputs = []
    for index, prompt in enumerate(workload.prompts):
        kwargs = {"past_key_values": copy.deepcopy(prefix_cache)} if prefix_cache is not None else {}
        ids = torch.tensor([prompt])
        generated = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                                   min_new_tokens=new_tokens, do_sample=False, **kwargs)
        outputs.append(generated[0, len(prompt):].tolist())
        if progress:
            progress(label, index + 1)
    return {"name": label, "wall_s": time.perf_counter() - started, "outputs": outputs}


def run_llamacpp(gguf_path: str | None, workload: RagWorkload, *, progress: Progress | None = None) -> dict:
    """Serial llama-cpp-python over the same GGUF with its prompt-prefix reuse, if installed."""
    try:
        from llama_cpp import Llama
    except ImportError:
        return {"name": "llama.cpp", "error": "llama-cpp-python is not installed (pip install llama-cpp-python)"}
    if gguf_path is None:
        return {"name": "llama.cpp", "error": "the model is not a GGUF file"}
    llm = Llama(model_path=gguf_path, n_ctx=4096, n_threads=torch.get_num_threads(), verbose=False)
    started = time.perf_counter()
    outputs = []
    for index, prompt in enumerate(workload.prompts):
        tokens = []
        # reset=True (the default) is the mode that keeps the longest common prefix of the last context
        for token in llm.generate(prompt, temp=0.0, top_k=1):
            tokens.append(int(token))
            if len(tokens) >= workload.max_new_tokens:
                break
        outputs.append(tokens)
        if progress:
            progress("llama.cpp", index + 1)
    return {"name": "llama.cpp", "wall_s": time.perf_counter() - started, "outputs": outputs}
