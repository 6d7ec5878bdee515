"""The prefix-heavy RAG workload: the shared file by path, or a generated one of the same shape.

Shape (see ../shared/workloads/README.md): one ~1,200-token system prompt and
a ~600-token document shared by 24 requests that differ only in a ~30-token
question; greedy, 16 new tokens each. Prompts are token ids rendered with the
model's chat template, to be replayed in order. Generation is deterministic
for a seed.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from bench.workloads.chat_template import render_chat

TOPICS = ["warranty claim", "refund", "license key", "account transfer", "support ticket", "shipment",
          "invoice", "return label", "firmware update", "data export", "password reset", "API quota"]
ADJECTIVES = ["pending", "legacy", "priority", "regional", "disputed", "enterprise", "expired", "bulk"]
ACTIONS = ["double-check the account region", "log the request in the ticketing system",
           "ask for the order reference", "explain any applicable fees", "escalate to a human agent",
           "confirm the customer's identity", "quote the relevant policy section"]
NEVER = ["promise a specific outcome", "share internal notes", "change billing details directly",
         "disclose another customer's data", "guess a delivery date"]
PARTS = ["anemometer", "rain gauge", "temperature probe", "humidity sensor", "solar panel", "battery pack",
         "wind vane", "barometer", "display unit", "mounting pole", "radio module", "UV sensor"]


@dataclass
class RagWorkload:
    """Prompts (token ids) sharing one long prefix; replay in order."""

    prompts: list[list[int]]
    max_new_tokens: int
    num_prefix_tokens: int
    source: str


def common_prefix_len(prompts: list[list[int]]) -> int:
    first = prompts[0]
    length = len(first)
    for other in prompts[1:]:
        n = 0
        while n < min(length, len(other)) and first[n] == other[n]:
            n += 1
        length = n
    return length


def load_rag_workload(path: str | Path) -> RagWorkload:
    data = json.loads(Path(path).read_text())
    prompts = [list(r["input_ids"]) for r in data["requests"]]
    max_new = int(data.get("generation", {}).get("max_new_tokens", 16))
    return RagWorkload(prompts, max_new, common_prefix_len(prompts), str(path))


def _grow_text(tokenizer, target_tokens: int, make_sentence) -> str:
    sentences: list[str] = []
    while len(tokenizer.encode(" ".join(sentences), add_special_tokens=False)) < target_tokens:
        sentences.append(make_sentence(len(sentences) + 1))
    return " ".join(sentences)


def _rule(rng: random.Random, n: int) -> str:
    return (f"Rule {n}: When a customer asks about a {rng.choice(ADJECTIVES)} {rng.choice(TOPICS)}, you must "
            f"{rng.choice(ACTIONS)} and never {rng.choice(NEVER)}.")


def _fact(rng: random.Random, n: int) -> str:
    return (f"The {rng.choice(PARTS)} of the Helios X2 weather station operates at {rng.randint(10, 400)} grams, "
            f"must be inspected every {rng.randint(2, 36)} months, and is covered by a "
            f"{rng.randint(1, 9)}-year warranty.")


def generate_rag_workload(tokenizer, *, seed: int = 1234, num_requests: int = 24, system_tokens: int = 1200,
                          document_tokens: int = 600, max_new_tokens: int = 16) -> RagWorkload:
    """A RAG workload of the shared shape, rendered with the model's chat template."""
    rng = random.Random(seed)
    system = "You are Aster, a customer support assistant. Follow every rule exactly. " + _grow_text(
        tokenizer, system_tokens, lambda n: _rule(rng, n))
    document = "Retrieved from the Helios X2 service manual. " + _grow_text(
        tokenizer, document_tokens, lambda n: _fact(rng, n))
    prompts = []
    for _ in range(num_requests):
        part, other = rng.sample(PARTS, 2)
        question = (f"What is the inspection interval for the {part}, and how does it compare with the {other}? "
                    f"Answer briefly and quote the exact numbers from the document, please")
        messages = [{"role": "system", "content": system},
                    {"role": "user", "content": f"Retrieved document:\n{document}\n\nQuestion:\n{question}"}]
        prompts.append(render_chat(tokenizer, messages))
    return RagWorkload(prompts, max_new_tokens, common_prefix_len(prompts), f"generated(seed={seed})")
