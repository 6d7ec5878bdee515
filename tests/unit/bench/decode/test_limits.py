"""The decode bench's ceilings: weight bytes per step by precision, and measured rates that are positive."""

import torch

from engine.models.llama import ModelShape
from bench.decode.limits import bytes_per_weight, decode_weight_bytes, linear_weight_counts, machine_limits

SHAPE = ModelShape(vocab_size=1000, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16,
                   intermediate_size=128, rms_norm_eps=1e-5, is_tied=True)


def test_weight_counts_follow_the_layer_shapes():
    layers, head = linear_weight_counts(SHAPE)
    assert layers == 2 * ((4 + 4) * 16 * 64 + 64 * 64 + 3 * 128 * 64) and head == 1000 * 64


def test_bytes_per_weight_shrink_with_quantization_and_int4_keeps_an_int8_head():
    assert bytes_per_weight(torch.float32, "none") == 4 and bytes_per_weight(torch.bfloat16, "none") == 2
    assert bytes_per_weight(torch.float32, "int8") == 1 + 2 / 32 and bytes_per_weight(torch.bfloat16, "int8") == 2
    assert bytes_per_weight(torch.float32, "int4") == bytes_per_weight(torch.bfloat16, "int4") == 0.5 + 4 / 32
    layers, head = linear_weight_counts(SHAPE)
    assert decode_weight_bytes(SHAPE, torch.float32, "int4") == layers * (0.5 + 4 / 32) + head * (1 + 2 / 32)
    assert decode_weight_bytes(SHAPE, torch.bfloat16, "int4") == layers * (0.5 + 4 / 32) + head * 2
    # w4a8 reads int4's layers and a w8a8 head: int8 bytes in either dtype (its kernel reads q, not a copy)
    assert bytes_per_weight(torch.bfloat16, "w8a8") == bytes_per_weight(torch.float32, "w8a8") == 1 + 2 / 32
    for dtype in (torch.float32, torch.bfloat16):
        assert decode_weight_bytes(SHAPE, dtype, "w4a8") == layers * (0.5 + 4 / 32) + head * (1 + 2 / 32)


def test_measured_limits_are_positive(monkeypatch):
    import bench.decode.limits as limits

    monkeypatch.setattr(limits, "BANDWIDTH_BYTES", {"cpu": 8 * 1024 * 1024})
    monkeypatch.setattr(limits, "MATMUL_SIZE", {"cpu": 128})
    found = machine_limits(SHAPE, torch.float32, "none")
    assert found["memory_bandwidth_gb_s"] > 0 and found["batch1_decode_limit_tok_s"] > 0
    assert found["prefill_limit_tok_s"] > 0
