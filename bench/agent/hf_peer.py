"""transformers as a peer of bench agent: the plain rows, one ``generate`` each, in process.

Every row is prefilled in full (transformers keeps no cache across calls), greedy, the row's own
max_tokens, stopping at end of sequence like a server. The first new token's time is taken from a
streamer (``generate`` hands it the prompt first, then each new token), so TTFT is measured the same
way for every request.
"""

from __future__ import annotations

import time

import torch

from bench.progress import Progress

NAME = "transformers"


class FirstTokenClock:
    """A generate() streamer that notes when the first generated token arrives."""

    def __init__(self) -> None:
        self.calls, self.first_at = 0, None

    def put(self, value) -> None:
        self.calls += 1
        if self.calls == 2 and self.first_at is None:  # call 1 is the prompt
            self.first_at = time.perf_counter()

    def end(self) -> None:
        pass


@torch.inference_mode()
def run_hf_agent(loaded_model, prompts: list[list[int]], max_tokens: list[int], *, dtype: torch.dtype,
                 progress: Progress | None = None) -> dict:
    """{"name", "wall_s", "ttft_s": per request, "prefill_tokens", "answers": text per request}."""
    model = loaded_model.build_hf_model(dtype)
    tokenizer = loaded_model.tokenizer
    warmup = torch.tensor([prompts[0][:32]])
    model.generate(warmup, attention_mask=torch.ones_like(warmup), max_new_tokens=2, do_sample=False)  # untimed
    ttfts, answers = [], []
    started = time.perf_counter()
    for index, (prompt, limit) in enumerate(zip(prompts, max_tokens)):
        ids, clock = torch.tensor([prompt]), FirstTokenClock()
        sent = time.perf_counter()
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=limit, do_sample=False,
                             streamer=clock, pad_token_id=tokenizer.eos_token_id)
        ttfts.append((clock.first_at or time.perf_counter()) - sent)
        answers.append(tokenizer.decode(out[0, len(prompt):], skip_special_tokens=True))
        if progress:
            progress(NAME, index + 1)
    return {"name": NAME, "wall_s": time.perf_counter() - started, "ttft_s": ttfts,
            "prefill_tokens": sum(len(p) for p in prompts), "answers": answers}
