"""The machine's ceilings for the decode bench: memory bandwidth (batch-1 decode) and matmul rate (prefill).

Batch-1 decode reads every weight once per token, so its ceiling is bandwidth / weight bytes: with the
runner's model, the bytes its generated rows' kernels really hold (quantized ones when quantized: a GGUF's
kept blocks, engine.kernels.cpu.gguf_linear), else a formula per mode. Prefill computes ~2 FLOPs per
weight per token, so its ceiling is the machine's matmul rate / (2 * linear weights). Both are measured
here, in this process, on the runner's device (with torch's current thread count on a CPU): bandwidth as
the best of a few full reads of a buffer far larger than the caches; the matmul rate, with the model, as
the best of a few passes of its first layer's own linears (the prompt rows' kernels, in its dtype) over
PREFILL_ROWS rows, else of a few square products. (A square 1024 torch.matmul ran a slower path than the
model's packed products, so prefill showed "273% of the matmul limit" on Qwen2.5-0.5B.) On CUDA the buffer
and the products are larger (an H200's L2 is 60 MB and its bfloat16 rate near 800 TFLOP/s) and each
timing waits for the device. The bench prints its rates as fractions of them.
"""

from __future__ import annotations

import time

import torch

from bench.decode.run import wait_for

BANDWIDTH_BYTES = {"cpu": 512 * 1024 * 1024, "cuda": 4 * 1024 * 1024 * 1024}
MATMUL_SIZE = {"cpu": 1024, "cuda": 8192}
REPEATS = 3
PREFILL_ROWS = 512  # prompt rows per timed pass of the model's linears (a prefill chunk)
LAYER_LINEARS = ("qkv", "o_proj", "gate_up", "down")
QUANT_GROUP_SIZE = 32  # weights per float16 scale (int8) or (scale, min) pair (int4)


def best_seconds(work, device: torch.device) -> float:
    """Best of REPEATS timings of ``work()`` after one untimed call; on CUDA each waits for the device."""
    work()
    wait_for(device)
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        work()
        wait_for(device)
        best = min(best, time.perf_counter() - started)
    return best


def memory_bandwidth_bytes_per_s(device: torch.device = torch.device("cpu")) -> float:
    """Best of REPEATS reads of a float32 buffer of BANDWIDTH_BYTES[device] (a sum touches every byte once)."""
    num_bytes = BANDWIDTH_BYTES[device.type]
    buffer = torch.ones(num_bytes // 4, device=device)
    return num_bytes / best_seconds(buffer.sum, device)


def matmul_flops_per_s(dtype: torch.dtype, device: torch.device = torch.device("cpu")) -> float:
    """Best of REPEATS square MATMUL_SIZE[device] products in ``dtype``: 2 n^3 FLOPs each."""
    size = MATMUL_SIZE[device.type]
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    return 2 * size**3 / best_seconds(lambda: a @ b, device)


def model_matmul_flops_per_s(model, device: torch.device = torch.device("cpu")) -> float:
    """Best of REPEATS passes of PREFILL_ROWS rows through the model's first layer's linears (prompt rows)."""
    layer = model.layers[0]
    linears = [getattr(layer, name) for name in LAYER_LINEARS]
    flops, inputs = 0, []
    for linear, in_features, out_features in zip(linears, *layer_linear_shapes(model.shape)):
        inputs.append(torch.randn(PREFILL_ROWS, in_features, device=device).to(model.dtype))
        flops += 2 * PREFILL_ROWS * in_features * out_features

    def work():
        with torch.inference_mode():
            for linear, x in zip(linears, inputs):
                linear(x)

    return flops / best_seconds(work, device)


def layer_linear_shapes(shape) -> tuple[list[int], list[int]]:
    """(in_features, out_features) of LAYER_LINEARS."""
    q_width, kv_width = shape.num_heads * shape.head_dim, shape.num_kv_heads * shape.head_dim
    h, i = shape.hidden_size, shape.intermediate_size
    return [h, q_width, h, i], [q_width + 2 * kv_width, h, 2 * i, h]


def model_decode_weight_bytes(model) -> float | None:
    """Bytes the generated rows' kernels of ``model`` hold (each layer's linears and the LM head), or None
    where one of them does not say (no native kernels: the formula of decode_weight_bytes stands)."""
    linears = [getattr(layer, name) for layer in model.layers for name in LAYER_LINEARS] + [model.lm_head]
    sizes = [getattr(getattr(linear, "by_row", None), "num_bytes", None) for linear in linears]
    return None if None in sizes else float(sum(sizes))


def linear_weight_counts(shape) -> tuple[int, int]:
    """(weights in the decoder layers' linears, weights in the LM head)."""
    q_kv = (shape.num_heads + 2 * shape.num_kv_heads) * shape.head_dim
    per_layer = (q_kv * shape.hidden_size + shape.hidden_size * shape.num_heads * shape.head_dim
                 + 3 * shape.intermediate_size * shape.hidden_size)
    return shape.num_layers * per_layer, shape.vocab_size * shape.hidden_size


def bytes_per_weight(dtype: torch.dtype, quantization: str) -> float:
    """Weight bytes a decode step reads per weight: the dtype's size dense; int8 one byte plus a float16 scale
    per QUANT_GROUP_SIZE weights for float32 rows (bfloat16 rows read the dequantized bfloat16 weight); int4
    (and w4a8) half a byte plus a float16 (scale, min) pair per QUANT_GROUP_SIZE weights
    (engine.kernels.cpu.quantized_linear)."""
    itemsize = torch.empty(0, dtype=dtype).element_size()
    if quantization == "int8":
        return 1.0 + 2 / QUANT_GROUP_SIZE if dtype == torch.float32 else float(itemsize)
    if quantization == "w8a8":
        return 1.0 + 2 / QUANT_GROUP_SIZE
    if quantization in ("int4", "w4a8"):
        return 0.5 + 4 / QUANT_GROUP_SIZE
    return float(itemsize)


def decode_weight_bytes(shape, dtype: torch.dtype, quantization: str) -> float:
    """Weight bytes one decode step reads (the LM head takes int8 when the layers take int4, w8a8 under w4a8)."""
    layers, head = linear_weight_counts(shape)
    head_mode = {"int4": "int8", "w4a8": "w8a8"}.get(quantization, quantization)
    return layers * bytes_per_weight(dtype, quantization) + head * bytes_per_weight(dtype, head_mode)


def machine_limits(shape, dtype: torch.dtype, quantization: str, device: torch.device = torch.device("cpu"),
                   model=None) -> dict:
    """The measured ceilings of ``device`` and what they allow this model: batch-1 decode and prefill tokens/s.
    ``model`` (the runner's LlamaModel): its kernels' own bytes and its own linears' rate (module docstring)."""
    bandwidth = memory_bandwidth_bytes_per_s(device)
    flops = model_matmul_flops_per_s(model, device) if model is not None else matmul_flops_per_s(dtype, device)
    weight_bytes = (model_decode_weight_bytes(model) if model is not None else None) or decode_weight_bytes(
        shape, dtype, quantization)
    layers, head = linear_weight_counts(shape)
    return {
        "memory_bandwidth_gb_s": bandwidth / 1e9,
        "decode_weight_mb": weight_bytes / 1e6,
        "batch1_decode_limit_tok_s": bandwidth / weight_bytes,
        "matmul_gflop_s": flops / 1e9,
        "prefill_limit_tok_s": flops / (2 * layers),  # prefill needs the LM head for the last token only
        "head_weights": head,
    }
