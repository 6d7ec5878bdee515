"""Engine integration fixtures: the real SmolLM2-135M-Instruct, loaded once per session, in fp32.

`make_engine(**config)` builds an Engine on a ModelRunner shared per pool
shape (weights laid out once) and, at teardown, shuts it down, flushes the
tree and checks that every page came back.
"""

from __future__ import annotations

import pytest
import torch

from tests.support.greedy_prompts import NUM_REFERENCE_TOKENS, PROMPTS



@pytest.fixture(scope="session")
def smollm():
    from engine.models.loader import load_model

    return load_model("smollm2-135m")


@pytest.fixture(scope="session")
def smollm_reference(smollm):
    """transformers' own forward over the same weights, fp32."""
    import torch

    return smollm.build_hf_model(torch.float32)


@pytest.fixture(scope="session")
def chat_prompts(smollm) -> list[list[int]]:
    from gateway.bench.workloads.rag import render_chat

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


@pytest.fixture(scope="session")
def runners(smollm):
    """(num_pages, page_size) -> an fp32 CPU ModelRunner over its own KVPool, built once."""
    from engine.kv_pool import KVPool
    from engine.models.llama import ModelShape
    from engine.runner import ModelRunner

    built = {}

    def get(num_pages: int, page_size: int):
        if (num_pages, page_size) not in built:
            shape = ModelShape.from_config(smollm.config)
            pool = KVPool(num_pages, page_size, num_layers=shape.num_layers, num_kv_heads=shape.num_kv_heads,
                          head_dim=shape.head_dim, dtype=torch.float32)
            built[num_pages, page_size] = ModelRunner(smollm, pool, torch.float32, "cpu")
        return built[num_pages, page_size]

    return get


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
