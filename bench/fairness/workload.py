"""The generated fairness workload: one tenant's long warm prompts, another's short cold ones (seeded).

flood: `num_prefixes` long system prompts (about `prefix_words` words each),
each request one of them plus a short question of its own, so all but the
question is cached once the prefixes are warm. cold: short prompts of
random words, each its own (nothing shared but the chat template's opening
tokens, under one page). Words are made of random syllables, so the
workload is the same for a given seed and tokenizer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from bench.workloads.chat_template import render_chat

SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "de", "fo", "ga", "hu", "je", "pi", "zo", "ber",
             "lan", "tor", "mes", "quin", "dra", "sel", "wun", "pha", "gri")


@dataclass(frozen=True)
class FairnessWorkload:
    flood_prefixes: list[list[int]]  # warmed before every pass
    flood_prompts: list[list[int]]  # cycled by the flood's closed loop
    cold_prompts: list[list[int]]  # sent one every cold_gap_s
    flood_concurrency: int
    flood_max_tokens: int
    cold_max_tokens: int
    cold_gap_s: float

    @property
    def num_cold(self) -> int:
        return len(self.cold_prompts)


def words(rng: random.Random, count: int) -> str:
    return " ".join("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(count))


def generate_workload(tokenizer, *, seed: int = 0, num_cold: int = 10, cold_words: int = 40,
                      num_prefixes: int = 2, prefix_words: int = 300, num_flood_prompts: int = 64,
                      flood_concurrency: int = 24, flood_max_tokens: int = 8, cold_max_tokens: int = 4,
                      cold_gap_s: float = 0.3) -> FairnessWorkload:
    """The workload for one seed; prompts rendered with the model's chat template."""
    rng = random.Random(seed)
    systems = [words(rng, prefix_words) for _ in range(num_prefixes)]
    prefixes = [render_chat(tokenizer, [{"role": "system", "content": s}, {"role": "user", "content": "hello"}])
                for s in systems]
    flood = [render_chat(tokenizer, [{"role": "system", "content": systems[i % num_prefixes]},
                                     {"role": "user", "content": words(rng, 6) + "?"}])
             for i in range(num_flood_prompts)]
    cold = [render_chat(tokenizer, [{"role": "system", "content": words(rng, 4)},
                                    {"role": "user", "content": words(rng, cold_words) + "?"}])
            for _ in range(num_cold)]
    return FairnessWorkload(prefixes, flood, cold, flood_concurrency, flood_max_tokens, cold_max_tokens, cold_gap_s)
