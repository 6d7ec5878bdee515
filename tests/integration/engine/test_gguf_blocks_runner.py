"""A quantized runner over a GGUF model keeps the file's own blocks: the default SmolLM2 (Q4_1 layers, a Q8_0
embedding that is also its tied head) on the native row kernels, every generated row over exactly the
float32 model's weights."""

import pytest
import torch

from engine import KVPool
from engine.kernels.cpu.gguf_linear import GgufBlockLinear
from engine.kernels.cpu.native import native_kernels
from engine.models.llama import ModelShape
from engine.runner import ModelRunner


@pytest.fixture(scope="module")
def int4_runner(smollm):
    assert native_kernels() is not None, "the native CPU kernels must build where the tests run"
    shape = ModelShape.from_config(smollm.config)
    pool = KVPool(4, 16, num_layers=shape.num_layers, num_kv_heads=shape.num_kv_heads, head_dim=shape.head_dim,
                  dtype=torch.float32)
    return ModelRunner(smollm, pool, torch.float32, "cpu", "int4")


def test_the_loaded_model_names_its_gguf_file(smollm):
    assert smollm.gguf_path is not None and smollm.gguf_path.suffix == ".gguf"


def test_int4_keeps_the_files_blocks_and_they_are_the_float32_weights(int4_runner, smollm):
    model = int4_runner.model
    kept = [l for layer in model.layers for l in (layer.o_proj, layer.gate_up, layer.down)] + [model.lm_head]
    assert all(isinstance(linear, GgufBlockLinear) for linear in kept)
    head = smollm.state_dict["model.embed_tokens.weight"].float()  # the tied head: the file's Q8_0 embedding
    x = torch.randn(3, head.shape[1], generator=torch.Generator().manual_seed(0))
    exact = x.double() @ head.double().T
    bound = (x.double().abs() @ head.double().abs().T) * head.shape[1] * 2.0**-24
    assert ((model.lm_head.by_row(x).double() - exact).abs() <= bound).all()
