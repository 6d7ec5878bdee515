"""Decode throughput of the model runner at several batch sizes (and transformers' generate beside it).

For each batch size B: B distinct prompts are prefilled in one forward, then
``num_tokens`` greedy decode steps run, each ONE ragged forward over the B
sequences' newest tokens. Only the decode steps are timed; tokens/s is
``B * num_tokens / seconds``, the median over ``repeat`` passes. ``cpu_tok_s``
divides by the process's CPU seconds instead: on a machine shared with other
work it shows what the code does per CPU-second (with one thread, the rate an
idle core would give), while the wall-clock rate shows what this run got. Pages come
from the runner's own KVPool and go back to it after every pass.

``--vs hf`` times transformers' ``generate`` (greedy, same prompts, same
dtype) and isolates its decode rate as ``B * (N - 1) / (t(N) - t(1))``, so its
prefill is not counted either.
"""

from __future__ import annotations

import statistics
import time

import torch

from engine.forward_batch import make_forward_batch
from bench.progress import Progress

PROMPT_WORDS = ("The history of the printing press", "Explain how rainbows form", "Write a haiku about autumn",
                "List three uses of copper", "Why is the sky blue", "Describe a busy harbour at dawn",
                "What makes bread rise", "Summarize the rules of chess")


def make_prompts(tokenizer, batch_size: int, prompt_len: int, vocab_size: int) -> list[list[int]]:
    """``batch_size`` distinct prompts of exactly ``prompt_len`` tokens (text when a tokenizer is given)."""
    prompts = []
    for i in range(batch_size):
        text = f"{PROMPT_WORDS[i % len(PROMPT_WORDS)]} (variant {i}). " * 16
        ids = tokenizer.encode(text, add_special_tokens=False) if tokenizer is not None else []
        if len(ids) < prompt_len:
            ids = ids + torch.randint(0, vocab_size, (prompt_len,), generator=torch.Generator().manual_seed(i)).tolist()
        prompts.append(ids[:prompt_len])
    return prompts


class PagedSequence:
    """One benchmark sequence's pages in the runner's pool; ``extend`` returns all its slots."""

    def __init__(self, pool) -> None:
        self.pool, self.pages, self.num_tokens = pool, [], 0

    def extend(self, num_new: int) -> torch.Tensor:
        page_size = self.pool.page_size
        num_needed = -(-(self.num_tokens + num_new) // page_size) - len(self.pages)
        if num_needed > 0:
            self.pages += list(self.pool.allocate(num_needed))
        self.num_tokens += num_new
        pages = torch.tensor(self.pages, dtype=torch.long)
        return (pages[:, None] * page_size + torch.arange(page_size)).reshape(-1)[: self.num_tokens]

    def free(self) -> None:
        self.pool.free(self.pages)
        self.pages = []


def wait_for(device: torch.device) -> None:
    """Block until ``device`` has run what was queued on it (CUDA kernels run asynchronously)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def argmax_tokens(logits: torch.Tensor) -> list[int]:
    return logits.argmax(-1).tolist()


def decode_pass(runner, prompts: list[list[int]], num_tokens: int, progress: Progress | None,
                label: str, choose=argmax_tokens) -> tuple[float, float, list[list[int]]]:
    """(decode wall seconds, decode process CPU seconds, generated ids per sequence) of one greedy pass.

    ``choose(logits) -> token ids`` picks each step's tokens (and is timed with the step).
    CPU seconds well above ``wall * num_threads`` cannot happen; far below it means other processes
    took the cores (the wall-clock rate is then a lower bound).
    """
    seqs = [PagedSequence(runner.pool) for _ in prompts]
    try:
        logits = runner.forward(make_forward_batch(prompts, [s.extend(len(p)) for s, p in zip(seqs, prompts)]))
        tokens = choose(logits)
        generated = [[t] for t in tokens]
        started, cpu_started = time.perf_counter(), time.process_time()
        for step in range(num_tokens):
            batch = make_forward_batch([[t] for t in tokens], [s.extend(1) for s in seqs], is_generated=True)
            tokens = choose(runner.forward(batch))
            for out, t in zip(generated, tokens):
                out.append(t)
            if progress is not None:
                progress(label, step + 1)
        return time.perf_counter() - started, time.process_time() - cpu_started, generated
    finally:
        for s in seqs:
            s.free()


def hf_generate_seconds(model, prompts: list[list[int]], num_tokens: int) -> tuple[float, float]:
    """(wall, process CPU) seconds of one greedy ``generate`` call."""
    input_ids = torch.tensor(prompts, dtype=torch.long, device=model.device)
    started, cpu_started = time.perf_counter(), time.process_time()
    with torch.inference_mode():
        model.generate(input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=num_tokens,
                       min_new_tokens=num_tokens, do_sample=False, pad_token_id=0)
    wait_for(model.device)
    return time.perf_counter() - started, time.process_time() - cpu_started


def hf_decode_rate(model, prompts: list[list[int]], num_tokens: int, progress: Progress | None,
                   label: str) -> tuple[float, float]:
    """transformers' decode-only (wall, CPU-time) tokens/s: (N - 1) extra tokens over generating N vs 1."""
    wall_one, cpu_one = hf_generate_seconds(model, prompts, 1)
    wall_all, cpu_all = hf_generate_seconds(model, prompts, num_tokens)
    if progress is not None:
        progress(label, num_tokens)
    num_extra = len(prompts) * (num_tokens - 1)
    return num_extra / max(wall_all - wall_one, 1e-9), num_extra / max(cpu_all - cpu_one, 1e-9)


def run_decode_bench(
    runner,
    batch_sizes: list[int],
    num_tokens: int = 64,
    prompt_len: int = 32,
    repeat: int = 3,
    hf_model=None,
    progress: Progress | None = None,
) -> dict:
    """Median decode tokens/s per batch size for the runner (and transformers when ``hf_model`` is given)."""
    if num_tokens < 2:
        raise ValueError("num_tokens must be at least 2")
    vocab = runner.shape.vocab_size
    results = []
    for batch_size in batch_sizes:
        prompts = make_prompts(runner.tokenizer, batch_size, prompt_len, vocab)
        decode_pass(runner, prompts, 4, None, "")  # warm-up: first-call allocations, oneDNN kernel selection
        rates, cpu_rates, hf_rates, hf_cpu_rates = [], [], [], []
        for r in range(repeat):  # runner and transformers alternate, so load changes hit both alike
            seconds, cpu_seconds, _ = decode_pass(runner, prompts, num_tokens, progress, f"radixgate b{batch_size} #{r + 1}")
            rates.append(batch_size * num_tokens / seconds)
            cpu_rates.append(batch_size * num_tokens / max(cpu_seconds, 1e-9))
            if hf_model is not None:
                hf_rate, hf_cpu_rate = hf_decode_rate(hf_model, prompts, num_tokens, progress,
                                                      f"transformers b{batch_size} #{r + 1}")
                hf_rates.append(hf_rate)
                hf_cpu_rates.append(hf_cpu_rate)
        row = {"batch": batch_size, "tok_s": statistics.median(rates), "tok_s_all": rates,
               "cpu_tok_s": statistics.median(cpu_rates)}
        if hf_model is not None:
            row.update(hf_tok_s=statistics.median(hf_rates), hf_tok_s_all=hf_rates,
                       hf_cpu_tok_s=statistics.median(hf_cpu_rates))
            row["speedup_vs_hf"] = row["tok_s"] / row["hf_tok_s"]
        results.append(row)
    return {
        "model": runner.loaded_model.model_id,
        "dtype": str(runner.dtype).removeprefix("torch."),
        "device": str(runner.device),
        "num_threads": torch.get_num_threads(),
        "num_tokens": num_tokens,
        "prompt_len": prompt_len,
        "repeat": repeat,
        "results": results,
    }


def prefill_seconds(runner, prompt: list[int]) -> float:
    seq = PagedSequence(runner.pool)
    try:
        batch = make_forward_batch([prompt], [seq.extend(len(prompt))])
        started = time.perf_counter()
        runner.forward(batch)
        wait_for(runner.device)
        return time.perf_counter() - started
    finally:
        seq.free()


def hf_prefill_seconds(model, prompt: list[int]) -> float:
    input_ids = torch.tensor([prompt], dtype=torch.long, device=model.device)
    started = time.perf_counter()
    with torch.inference_mode():
        model(input_ids, use_cache=False, logits_to_keep=1)
    wait_for(model.device)
    return time.perf_counter() - started


def run_prefill_bench(runner, prompt_len: int = 1024, repeat: int = 3, hf_model=None) -> dict:
    """Median prefill tokens/s of one ``prompt_len``-token prompt (last-token logits only, as serving needs)."""
    prompt = make_prompts(runner.tokenizer, 1, prompt_len, runner.shape.vocab_size)[0]
    prefill_seconds(runner, prompt)  # warm-up
    if hf_model is not None:
        hf_prefill_seconds(hf_model, prompt)
    rates, hf_rates = [], []
    for _ in range(repeat):
        rates.append(prompt_len / prefill_seconds(runner, prompt))
        if hf_model is not None:
            hf_rates.append(prompt_len / hf_prefill_seconds(hf_model, prompt))
    row = {"prompt_len": prompt_len, "tok_s": statistics.median(rates), "tok_s_all": rates}
    if hf_model is not None:
        row["hf_tok_s"] = statistics.median(hf_rates)
        row["hf_tok_s_all"] = hf_rates
        row["speedup_vs_hf"] = row["tok_s"] / row["hf_tok_s"]
    return row
