"""CPU float32 linears on oneDNN-packed weights: one row's bits never depend on the rows beside it."""

import pytest
import torch
import torch.nn.functional as F

from engine.models.llama import linear
from engine.models.packed_linear import PackedLinear, packing_applies

pytestmark = pytest.mark.skipif(not packing_applies(torch.float32, torch.device("cpu")),
                                reason="this torch build has no oneDNN")


@pytest.mark.parametrize("shape", [(960, 576), (576, 1536), (3072, 576)])
def test_a_row_gets_the_same_bits_in_any_batch(shape):
    gen = torch.Generator().manual_seed(0)
    weight = torch.randn(shape, generator=gen) * 0.05
    bias = torch.randn(shape[0], generator=gen)
    packed = PackedLinear(weight)
    x = torch.randn(1100, shape[1], generator=gen)
    alone = linear(x[:1], packed, bias)
    for rows in (2, 3, 5, 8, 16, 24, 33, 100, 257, 1024, 1100):
        assert torch.equal(linear(x[:rows], packed, bias)[:1], alone), f"row 0 changed in a batch of {rows}"
    assert torch.allclose(linear(x, packed, bias), F.linear(x, weight, bias), rtol=0, atol=1e-4)

