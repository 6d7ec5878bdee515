"""The transformers baseline of bench rag: serial `generate` over the same workload and dtype.

It runs from scratch (every prompt prefilled in full) or with prefix reuse
(the shared prefix is prefilled once into a DynamicCache that each request
starts from a deep copy of). Greedy, exactly max_new_tokens new tokens each.
"""

from __future__ import annotations

import copy
import time

import torch

from bench.hf_cache import cache_kwargs, returned_cache
from bench.progress import Progress
from bench.rag import BASELINE_WARMUP_TOKENS
from bench.workloads.rag import RagWorkload


@torch.inference_mode()
def run_hf(loaded_model, workload: RagWorkload, *, dtype: torch.dtype = torch.float32, reuse_prefix: bool,
           progress: Progress | None = None, device: torch.device = torch.device("cpu")) -> dict:
    """Serial transformers generate over the workload on ``device``; wall time and greedy outputs."""
    model = loaded_model.build_hf_model(dtype).to(device)
    new_tokens = workload.max_new_tokens
    label = "hf prefix-reuse" if reuse_prefix else "hf from scratch"
    prefix_len = min(workload.num_prefix_tokens, min(len(p) for p in workload.prompts) - 1)
    # untimed, like radixgate's warm-up
    warmup_ids = torch.tensor([workload.prompts[0][:BASELINE_WARMUP_TOKENS]], device=device)
    model.generate(warmup_ids, attention_mask=torch.ones_like(warmup_ids), max_new_tokens=2, do_sample=False)
    started = time.perf_counter()
    prefix_cache = None
    if reuse_prefix:
        prefix_ids = torch.tensor([workload.prompts[0][:prefix_len]], device=device)
        prefix_cache = returned_cache(model, model(prefix_ids, use_cache=True))
    outputs = []
    for index, prompt in enumerate(workload.prompts):
        kwargs = cache_kwargs(model, copy.deepcopy(prefix_cache))
        ids = torch.tensor([prompt], device=device)
        generated = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                                   min_new_tokens=new_tokens, do_sample=False, **kwargs)
        outputs.append(generated[0, len(prompt):].tolist())
        if progress:
            progress(label, index + 1)
    return {"name": label, "wall_s": time.perf_counter() - started, "outputs": outputs}
