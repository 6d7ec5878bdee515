"""Engine integration fixtures over the real SmolLM2-135M-Instruct (`smollm`, `runners`: tests/integration/conftest.py), fp32.

`make_engine(**config)` builds an Engine on a ModelRunner shared per pool
shape (weights laid out once) and, at teardown, shuts it down, flushes the
tree and checks that every page came back.
"""

from __future__ import annotations

import pytest
import torch

from tests.support.greedy_prompts import NUM_REFERENCE_TOKENS, PROMPTS


@pytest.fixture(scope="session")
def smollm_reference(smollm):
    """transformers' own forward over the same weights, fp32."""
    import torch

    return smollm.build_hf_model(torch.float32)


@pytest.fixture(scope="session")
def chat_prompts(smollm) -> list[list[int]]:
    from bench.workloads.chat_template import render_chat

    return [render_chat(smollm.tokenizer, [{"role": "user", "content": p}]) for p in PROMPTS]


@pytest.fixture(scope="session")
def hf_greedy(smollm, chat_prompts) -> list[list[int]]:
    """transformers generate, greedy, up to 32 new tokens, fp32."""
    model = smollm.build_hf_model(torch.float32)
    outputs = []
    with torch.inference_mode():
        for prompt in chat_prompts:
            ids = torch.tensor([prompt])
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=NUM_REFERENCE_TOKENS)
            outputs.append(out[0, len(prompt):].tolist())
    return outputs


@pytest.fixture
def make_engine(runners):
    from engine import Engine, EngineConfig

    engines = []

    def make(num_pages: int = 512, page_size: int = 16, **overrides):
        config = EngineConfig(dtype="float32", device="cpu", page_size=page_size, num_pages=num_pages, **overrides)
        engine = Engine(config, runner=runners(num_pages, page_size)).start()
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.shutdown()
        engine.flush_cache()
        assert engine.pool.num_free_pages == engine.pool.num_pages, "pages leaked"
