"""EngineConfig.native_kernels=False reaches every kernel: no linear, norm or model op takes the native module."""

import torch

from engine.kernels import make_linear, native_ops

CPU = torch.device("cpu")


def test_switched_off_no_kernel_takes_the_native_module():
    assert native_ops(torch.float32, CPU, False) is None
    weight = torch.randn(64, 64)
    for mode in ("none", "int8", "int4"):
        assert getattr(make_linear(weight, quantization=mode, native=False), "by_row", None) is None, mode
