"""Tiny random Llama/Qwen2/Mistral configs and a minimal slot pool for the model-runner tests.

``SlotPool`` is a stand-in with the KVPool tensor layout (slot-indexed
``(num_pages * page_size, num_kv_heads, head_dim)`` per layer) that hands out
pages in a shuffled order, so every test exercises non-contiguous KV.
"""

import random

import torch
from transformers import LlamaConfig, MistralConfig, Qwen2Config

TINY = dict(vocab_size=320, hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.1, rms_norm_eps=1e-6)
LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
TINY_CONFIGS = {
    "llama-tied": lambda: LlamaConfig(**TINY, tie_word_embeddings=True),
    "llama3-untied": lambda: LlamaConfig(**TINY, tie_word_embeddings=False, rope_parameters=LLAMA3_ROPE),
    "qwen2-tied": lambda: Qwen2Config(**TINY, tie_word_embeddings=True),
    "qwen2-untied": lambda: Qwen2Config(**TINY, tie_word_embeddings=False),
    "mistral-untied": lambda: MistralConfig(**{**TINY, "num_key_value_heads": 1}, tie_word_embeddings=False),
    "mistral-window": lambda: MistralConfig(**TINY, tie_word_embeddings=True, sliding_window=8),
}


class SlotPool:
    """KVPool-shaped tensors plus a shuffled page allocator (test stand-in for engine.kv_pool.KVPool)."""

    def __init__(self, num_pages, page_size, num_layers, num_kv_heads, head_dim, dtype=torch.float32, seed=0):
        self.page_size, self.num_pages = page_size, num_pages
        shape = (num_pages * page_size, num_kv_heads, head_dim)
        self.k_cache = [torch.full(shape, float("nan"), dtype=dtype) for _ in range(num_layers)]
        self.v_cache = [torch.full(shape, float("nan"), dtype=dtype) for _ in range(num_layers)]
        self.free_pages = list(range(num_pages))
        random.Random(seed).shuffle(self.free_pages)

    def allocate(self, n):
        pages, self.free_pages = self.free_pages[:n], self.free_pages[n:]
        return pages


class SeqSlots:
    """The kv slots of one sequence, grown page by page from a SlotPool."""

    def __init__(self, pool):
        self.pool, self.pages, self.slots = pool, [], []

    def extend(self, num_tokens):
        """Slots for ``num_tokens`` more tokens; returns ALL slots of the sequence so far."""
        page_size = self.pool.page_size
        num_needed = -(-(len(self.slots) + num_tokens) // page_size) - len(self.pages)
        self.pages += self.pool.allocate(num_needed)
        for j in range(len(self.slots), len(self.slots) + num_tokens):
            self.slots.append(self.pages[j // page_size] * page_size + j % page_size)
        return list(self.slots)
