"""bench accuracy: each engine and precision against the float32 transformers model, on the same prompts.

The reference is transformers in float32 over the weights radixgate loads: for every prompt (the
user turn in the model's chat template) it generates ``num_tokens`` greedy tokens (raw argmax, EOS
not special) and keeps the next-token distribution of each. A candidate (radixgate in a dtype and
quantization, transformers in a dtype) is measured twice:

  * teacher-forced: fed the reference's tokens, its distribution at each of those positions is
    compared with the reference's: mean KL(reference || candidate) in nats, and the share of
    positions with the same top token (engine.models.divergence.compare_logits);
  * free-running: it generates its own greedy tokens; ``greedy_agreement`` is the mean share of the
    first ``num_tokens`` that match the reference before the first difference, ``greedy_exact`` the
    share of prompts whose tokens all match.

radixgate runs every prompt in one ragged batch (prefill, then one decode step per token, the way it
serves); transformers runs prompt by prompt with its KV cache. The reference always runs on the CPU;
on ``device="cuda"`` both candidates run on the GPU, so each dtype's row compares like with like.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.forward_batch import make_forward_batch
from engine.speculation import matching_prefix
from bench.decode.run import PagedSequence
from bench.hf_cache import cache_kwargs, returned_cache
from bench.progress import Progress


@dataclass
class Reference:
    prompts: list[list[int]]
    tokens: list[list[int]]  # greedy tokens per prompt, num_tokens each
    logits: torch.Tensor  # (num_prompts, num_tokens, vocab) float32: the distribution each token was drawn from


@dataclass
class Figures:
    mean_kl: float
    top1_agreement: float
    greedy_agreement: float
    greedy_exact: float


def encode_prompts(tokenizer, texts) -> list[list[int]]:
    """Each text as one user turn in the tokenizer's chat template, ready for the assistant's answer."""
    return [list(tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                               tokenize=True, return_dict=False)) for text in texts]


def figures(reference: Reference, forced_logits: torch.Tensor, tokens: list[list[int]]) -> Figures:
    """Figures of a candidate from its teacher-forced logits (like reference.logits) and its greedy tokens."""
    ref_logp = torch.log_softmax(reference.logits, dim=-1)
    logp = torch.log_softmax(forced_logits.float(), dim=-1)
    kl = (ref_logp.exp() * (ref_logp - logp)).sum(dim=-1).clamp(min=0)  # (num_prompts, num_tokens)
    top1 = (reference.logits.argmax(-1) == forced_logits.argmax(-1)).float().mean()
    prefixes = [matching_prefix(ref, own) for ref, own in zip(reference.tokens, tokens)]
    num_tokens = len(reference.tokens[0])
    return Figures(float(kl.mean()), float(top1), sum(prefixes) / (num_tokens * len(prefixes)),
                   sum(p == num_tokens for p in prefixes) / len(prefixes))


# ---- transformers ----------------------------------------------------------------------------------
@torch.inference_mode()
def hf_greedy(model, prompt: list[int], num_tokens: int) -> tuple[list[int], torch.Tensor]:
    """(greedy tokens, (num_tokens, vocab) float32 logits they were drawn from), with transformers' KV cache."""
    ids, past, tokens, rows = torch.tensor([prompt], device=model.device), None, [], []
    for _ in range(num_tokens):
        out = model(input_ids=ids, use_cache=True, **cache_kwargs(model, past))
        past, logits = returned_cache(model, out), out.logits[0, -1].float().cpu()
        tokens.append(int(logits.argmax()))
        rows.append(logits)
        ids = torch.tensor([[tokens[-1]]], device=model.device)
    return tokens, torch.stack(rows)


@torch.inference_mode()
def hf_forced(model, prompt: list[int], tokens: list[int]) -> torch.Tensor:
    """(len(tokens), vocab) float32: transformers' distribution of each of ``tokens`` after the prompt."""
    ids = torch.tensor([prompt + tokens[:-1]], device=model.device)
    return model(input_ids=ids, use_cache=False).logits[0, len(prompt) - 1:].float().cpu()


def hf_reference(model, prompts: list[list[int]], num_tokens: int, progress: Progress | None) -> Reference:
    tokens, logits = [], []
    for i, prompt in enumerate(prompts):
        own, rows = hf_greedy(model, prompt, num_tokens)
        tokens.append(own)
        logits.append(rows)
        if progress:
            progress("reference (transformers float32)", i + 1)
    return Reference(prompts, tokens, torch.stack(logits))


def hf_figures(model, reference: Reference, label: str, progress: Progress | None) -> Figures:
    forced, tokens = [], []
    for i, prompt in enumerate(reference.prompts):
        forced.append(hf_forced(model, prompt, reference.tokens[i]))
        tokens.append(hf_greedy(model, prompt, len(reference.tokens[i]))[0])
        if progress:
            progress(label, i + 1)
    return figures(reference, torch.stack(forced), tokens)


# ---- radixgate -------------------------------------------------------------------------------------
@torch.inference_mode()
def runner_steps(runner, prompts: list[list[int]], num_tokens: int,
                 forced: list[list[int]] | None = None) -> tuple[list[list[int]], torch.Tensor]:
    """All prompts in one ragged batch: a prefill, then ``num_tokens - 1`` decode steps feeding each
    sequence's own argmax, or ``forced[i]``'s tokens when given. (tokens, (num_prompts, num_tokens, vocab))."""
    seqs = [PagedSequence(runner.pool) for _ in prompts]
    try:
        step_logits = [runner.forward(make_forward_batch(prompts, [s.extend(len(p)) for s, p in zip(seqs, prompts)]))]
        tokens = [[t] for t in step_logits[-1].argmax(-1).tolist()]
        for step in range(1, num_tokens):
            feed = [f[step - 1] for f in forced] if forced is not None else [t[-1] for t in tokens]
            step_logits.append(runner.forward(make_forward_batch([[t] for t in feed], [s.extend(1) for s in seqs],
                                                                   is_generated=True)))
            for out, t in zip(tokens, step_logits[-1].argmax(-1).tolist()):
                out.append(t)
        return tokens, torch.stack(step_logits, dim=1).cpu()
    finally:
        for s in seqs:
            s.free()


def runner_figures(runner, reference: Reference) -> Figures:
    num_tokens = len(reference.tokens[0])
    _, forced_logits = runner_steps(runner, reference.prompts, num_tokens, forced=reference.tokens)
    tokens, _ = runner_steps(runner, reference.prompts, num_tokens)
    return figures(reference, forced_logits, tokens)


# ---- the bench -------------------------------------------------------------------------------------
KL_TOLERANCE = 1e-4  # nats: float32 against the float32 reference differs only by summation order


def build_runner(loaded_model, dtype: torch.dtype, quantization: str, prompts: list[list[int]], num_tokens: int,
                 device: torch.device):
    from engine import KVPool
    from engine.models.llama import ModelShape
    from engine.runner import ModelRunner

    shape = ModelShape.from_config(loaded_model.config)
    page_size = 16
    num_pages = sum(-(-(len(p) + num_tokens) // page_size) for p in prompts) + 4
    pool = KVPool(num_pages, page_size, num_layers=shape.num_layers, num_kv_heads=shape.num_kv_heads,
                  head_dim=shape.head_dim, dtype=dtype, device=device)
    return ModelRunner(loaded_model, pool, dtype, device, quantization)


def quantized_checks(rows: list[dict]) -> dict[str, bool]:
    """Per radixgate quantized mode ("dtype/mode"): whether its KL from float32 is no worse than transformers'
    own bfloat16 (the cheapest thing a user could run instead); empty without a transformers bfloat16 row."""
    hf = next((r for r in rows if r["engine"] == "transformers" and r["dtype"] == "bfloat16"), None)
    if hf is None:
        return {}
    return {f"{r['dtype']}/{r['quantization']}": r["mean_kl"] <= hf["mean_kl"] + KL_TOLERANCE
            for r in rows if r["engine"] == "radixgate" and r["quantization"] != "none"}


def run_accuracy(loaded_model, texts, *, num_tokens: int = 32, dtypes=(torch.float32, torch.bfloat16),
                 quantizations=("none",), device: torch.device | str = "cpu",
                 progress: Progress | None = None, llamacpp_gguf: str | None = None,
                 vllm_python: str | None = None) -> dict:
    """One row per candidate ({"engine", "dtype", "quantization", figures...}) and, per dtype, whether
    radixgate without quantization is no further from float32 than transformers in that dtype. With
    ``llamacpp_gguf``, a row for llama.cpp over that GGUF (its own weights and arithmetic); with
    ``vllm_python``, a row per dtype for vLLM's CPU build on the same weights (bench.accuracy.vllm_peer).
    "peer_errors" says why a peer's row is missing if it could not run."""
    device = torch.device(device)
    prompts = encode_prompts(loaded_model.tokenizer, texts)
    reference_model = loaded_model.build_hf_model(torch.float32)
    reference = hf_reference(reference_model, prompts, num_tokens, progress)
    rows = []
    for dtype in dtypes:
        name = str(dtype).removeprefix("torch.")
        same_as_reference = dtype == torch.float32 and device.type == "cpu"
        hf_model = reference_model if same_as_reference else loaded_model.build_hf_model(dtype).to(device)
        hf = hf_figures(hf_model, reference, f"transformers {name}", progress)
        rows.append({"engine": "transformers", "dtype": name, "quantization": "none", **hf.__dict__})
        del hf_model
        for quantization in quantizations:
            runner = build_runner(loaded_model, dtype, quantization, prompts, num_tokens, device)
            own = runner_figures(runner, reference)
            if progress:
                progress(f"radixgate {name} {quantization}", len(prompts))
            rows.append({"engine": "radixgate", "dtype": name, "quantization": quantization, **own.__dict__})
            del runner
    peer_errors = {}
    if vllm_python is not None:
        from bench.accuracy.vllm_peer import vllm_candidate

        for dtype in dtypes:
            name = str(dtype).removeprefix("torch.")
            found = vllm_candidate(vllm_python, loaded_model.path, dtype, reference, torch.get_num_threads(), progress)
            if "error" in found:
                peer_errors[f"vLLM {name}"] = found["error"]
                continue
            own = figures(reference, found["forced_logits"], found["tokens"])
            rows.append({"engine": "vLLM", "dtype": name, "quantization": "none", **own.__dict__})
    if llamacpp_gguf is not None:
        from bench.accuracy.llamacpp_peer import llamacpp_candidate

        found = llamacpp_candidate(llamacpp_gguf, reference, torch.get_num_threads(), progress)
        if "error" in found:
            peer_errors["llama.cpp"] = found["error"]
        else:
            own = figures(reference, found["forced_logits"], found["tokens"])
            rows.append({"engine": "llama.cpp", "dtype": "float32", "quantization": "gguf", **own.__dict__})
    checks = {}
    for row in rows:
        if row["engine"] == "radixgate" and row["quantization"] == "none":
            hf = next(r for r in rows if r["engine"] == "transformers" and r["dtype"] == row["dtype"])
            checks[row["dtype"]] = row["mean_kl"] <= hf["mean_kl"] + KL_TOLERANCE
    return {"quantized_vs_transformers_bfloat16": quantized_checks(rows), "model": loaded_model.model_id, "num_prompts": len(prompts), "num_tokens": num_tokens,
            "device": str(device), "num_threads": torch.get_num_threads(), "kl_tolerance": KL_TOLERANCE,
            "rows": rows, "radixgate_no_further_than_transformers": checks, "peer_errors": peer_errors}
