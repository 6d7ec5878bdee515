"""Llama-family forward (Llama, Llama-3, Mistral, Qwen2, SmolLM) over the paged KV cache.

Weights come from a transformers state dict (HF names) and are re-laid out
once: q/k/v fused into one matrix (plus Qwen2's q/k/v bias), gate/up fused into
one matrix, the LM head tied to the embeddings when the config says so.
All linear layers run over all T new tokens of the ragged batch at once; only
attention looks at sequence boundaries. Which kernels run the linears and the
attention is engine.kernels' choice (the seam): this module only lays out the
weights and calls them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from engine.kernels import Attention, Linear, make_linear, make_norm, native_ops
from engine.kernels.row_split import RowSplit, split_rows
from engine.models.rope import RotaryTable, apply_rotary


@dataclass
class LayerWeights:
    """One decoder layer; each Linear holds its weight (shape below) and its bias, if the checkpoint has one."""

    input_norm: torch.Tensor  # (hidden,)
    qkv: Linear  # ((H + 2 * KVH) * D, hidden), Qwen2's q/k/v bias fused likewise
    o_proj: Linear  # (hidden, H * D)
    post_norm: torch.Tensor  # (hidden,)
    gate_up: Linear  # (2 * intermediate, hidden)
    down: Linear  # (hidden, intermediate)


@dataclass(frozen=True)
class ModelShape:
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float
    is_tied: bool

    @classmethod
    def from_config(cls, config) -> "ModelShape":
        num_heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // num_heads
        return cls(
            vocab_size=config.vocab_size,
            hidden_size=config.hidden_size,
            num_layers=config.num_hidden_layers,
            num_heads=num_heads,
            num_kv_heads=getattr(config, "num_key_value_heads", None) or num_heads,
            head_dim=head_dim,
            intermediate_size=config.intermediate_size,
            rms_norm_eps=config.rms_norm_eps,
            is_tied=bool(getattr(config, "tie_word_embeddings", False)),
        )


def layer_windows(config) -> list[int | None]:
    """Sliding-window size per layer (None = full attention), following transformers' conventions."""
    window = getattr(config, "sliding_window", None)
    num_layers = config.num_hidden_layers
    layer_types = getattr(config, "layer_types", None)
    if not window:
        return [None] * num_layers
    if layer_types:
        return [window if t == "sliding_attention" else None for t in layer_types]
    if config.model_type == "mistral" or getattr(config, "use_sliding_window", False):
        return [window] * num_layers
    return [None] * num_layers


def activation(config):
    name = getattr(config, "hidden_act", "silu")
    if name in ("silu", "swish"):
        return F.silu
    from transformers.activations import ACT2FN

    return ACT2FN[name]


class LlamaModel:
    """The weights of a Llama-family decoder and its forward over a ragged batch."""

    def __init__(self, config, state_dict: dict[str, torch.Tensor], dtype: torch.dtype, device="cpu",
                 quantization: str = "none", native: bool = True) -> None:
        """``quantization`` ("none", "int8", "int4", "w4a8", "w8a8") is applied to every decoder linear; the LM
        head takes int8 when the layers take int4, w8a8 when they take w4a8 (it is the largest matrix and the
        logits feel it most). ``native`` False runs torch's ops only (no native CPU kernels anywhere)."""
        self.config = config
        self.quantization = quantization
        self.is_native_enabled = native
        self.shape = ModelShape.from_config(config)
        self.dtype = dtype
        self.device = torch.device(device)
        self.windows = layer_windows(config)
        self.act = activation(config)
        self.native = native_ops(dtype, self.device, native)  # radixgate's CPU kernels, or None: torch's ops
        self.norm_op = make_norm(self.shape.rms_norm_eps, self.native)
        get = lambda name: state_dict[name].to(device=self.device, dtype=dtype).contiguous()  # noqa: E731
        self.embed = get("model.embed_tokens.weight")  # (vocab, hidden)
        self.norm = get("model.norm.weight")
        has_head = "lm_head.weight" in state_dict and not self.shape.is_tied
        self.layers = [self._read_layer(state_dict, i, dtype) for i in range(self.shape.num_layers)]
        # a tied head reads the embedding matrix; the lookup keeps using self.embed
        head_quantization = {"int4": "int8", "w4a8": "w8a8"}.get(quantization, quantization)
        self.lm_head = make_linear(get("lm_head.weight") if has_head else self.embed, quantization=head_quantization,
                                   native=native)
        max_positions = getattr(config, "max_position_embeddings", 4096) or 4096
        self.rotary = RotaryTable(config, self.shape.head_dim, min(max_positions, 32768), self.device)

    def _read_layer(self, sd: dict, i: int, dtype) -> LayerWeights:
        p = f"model.layers.{i}."
        get = lambda name: sd[p + name].to(device=self.device, dtype=dtype)  # noqa: E731
        opt = lambda name: get(name).contiguous() if p + name in sd else None  # noqa: E731
        linear = lambda weight, bias=None: make_linear(weight, bias, self.quantization, self.is_native_enabled)  # noqa: E731
        qkv_names = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"]
        qkv_bias = None
        if p + "self_attn.q_proj.bias" in sd:
            qkv_bias = torch.cat([get(n + ".bias") for n in qkv_names]).contiguous()
        gate_up_bias = None
        if p + "mlp.gate_proj.bias" in sd:
            gate_up_bias = torch.cat([get("mlp.gate_proj.bias"), get("mlp.up_proj.bias")]).contiguous()
        return LayerWeights(
            input_norm=get("input_layernorm.weight").contiguous(),
            qkv=linear(torch.cat([get(n + ".weight") for n in qkv_names]).contiguous(), qkv_bias),
            o_proj=linear(get("self_attn.o_proj.weight").contiguous(), opt("self_attn.o_proj.bias")),
            post_norm=get("post_attention_layernorm.weight").contiguous(),
            gate_up=linear(torch.cat([get("mlp.gate_proj.weight"), get("mlp.up_proj.weight")]).contiguous(),
                           gate_up_bias),
            down=linear(get("mlp.down_proj.weight").contiguous(), opt("mlp.down_proj.bias")),
        )

    def forward(
        self,
        input_ids: torch.Tensor,  # (T,) long
        positions: torch.Tensor,  # (T,) long
        attention: Attention,
        plans: list,  # attention.plan(...) per layer (layers with the same window share one)
        logit_index: torch.Tensor,  # (num_rows,) long: tokens whose logits are returned
        rows: RowSplit | None = None,  # which tokens are generated ones (their linears may run by row)
        logit_rows: RowSplit | None = None,  # the same for the logit_index rows
    ) -> torch.Tensor:
        """Run all layers over the T new tokens; returns float32 logits (num_rows, vocab)."""
        s = self.shape
        num_tokens = input_ids.shape[0]
        q_width, kv_width = s.num_heads * s.head_dim, s.num_kv_heads * s.head_dim
        if self.native is not None:
            cos, sin = self.rotary.lookup_float32(positions)  # (T, rotary_dim) float32
        else:
            cos, sin = self.rotary.lookup(positions, self.dtype)  # (T, 1, rotary_dim)
        hidden = F.embedding(input_ids, self.embed)  # (T, hidden); updated in place by each residual add
        x = self.norm_op(hidden, self.layers[0].input_norm)
        for i, layer in enumerate(self.layers):
            qkv = split_rows(rows, layer.qkv, x)  # (T, (H + 2 KVH) D)
            if self.native is not None:  # float32 inside, rounded once
                qk = self.native.rotary(qkv, s.num_heads + s.num_kv_heads, s.head_dim, cos, sin)
            else:
                qk = qkv[:, : q_width + kv_width].view(num_tokens, s.num_heads + s.num_kv_heads, s.head_dim)
                qk = apply_rotary(qk, cos, sin)
            q, k = qk[:, : s.num_heads], qk[:, s.num_heads :]
            v = qkv[:, q_width + kv_width :].view(num_tokens, s.num_kv_heads, s.head_dim)
            attn = attention.forward(i, q, k, v, plans[i])  # (T, H D)
            x = self.norm_op.add_(hidden, split_rows(rows, layer.o_proj, attn), layer.post_norm)
            gate_up = split_rows(rows, layer.gate_up, x)  # (T, 2 I)
            if self.native is not None and self.act is F.silu:  # float32 inside, rounded once
                activated = self.native.silu_mul(gate_up)
            else:
                gate, up = gate_up.chunk(2, dim=-1)
                activated = self.act(gate) * up
            mlp = split_rows(rows, layer.down, activated)
            if i + 1 < len(self.layers):
                x = self.norm_op.add_(hidden, mlp, self.layers[i + 1].input_norm)
            else:
                hidden.add_(mlp)
        last = self.norm_op(hidden.index_select(0, logit_index), self.norm)
        return split_rows(logit_rows, self.lm_head, last).float()
