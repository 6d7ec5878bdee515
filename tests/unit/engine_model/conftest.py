"""Fixtures for the model-runner tests: tiny random Llama/Qwen2/Mistral models, a minimal slot pool.

``SlotPool`` is a stand-in with the KVPool tensor layout (slot-indexed
``(num_pages * page_size, num_kv_heads, head_dim)`` per layer) that hands out
pages in a shuffled order, so every test exercises non-contiguous KV.
"""

import random

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, MistralConfig, Qwen2Config

from engine.models.loader import LoadedModel

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


@pytest.fixture
def make_tiny_model():
    """name -> (reference transformers model in fp32, LoadedModel with the same weights)."""

    def make(name, seed=0):
        torch.manual_seed(seed)
        config = TINY_CONFIGS[name]()
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="eager").eval()
        with torch.no_grad():  # transformers inits biases to 0 and norms to 1: randomize so they are tested
            for param_name, param in model.named_parameters():
                if param_name.endswith("bias"):
                    param.normal_(0.0, 0.1)
                elif "norm" in param_name:
                    param.add_(torch.randn_like(param) * 0.1)
        loaded = LoadedModel(config, dict(model.state_dict()), None, name, config.max_position_embeddings,
                             [config.eos_token_id or 0])
        return model, loaded

    return make


@pytest.fixture(scope="session")
def smollm2():
    """The default model (SmolLM2-135M-Instruct), loaded once per session from the GGUF cache."""
    from engine.models.loader import load_model

    return load_model("smollm2-135m")


@pytest.fixture(scope="session")
def smollm2_reference(smollm2):
    """transformers' own forward over the same weights, fp32."""
    return smollm2.build_hf_model(torch.float32)
