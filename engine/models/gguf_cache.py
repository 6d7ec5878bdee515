"""Dequantize a GGUF file once with transformers and keep the result as a Hugging Face directory.

The cache directory (``<cache root>/<gguf stem>-<hash of its path>``) holds ``model.safetensors``
(dequantized fp32 weights, HF names; a tied LM head is not stored; over SHARD_BYTES they are split into
``model-0000k-of-0000n.safetensors`` shards and ``model.safetensors.index.json``, so writing them never
copies more than one shard at a time on top of the model),
``config.json``, the tokenizer files and ``source.json`` (path, size and mtime
of the GGUF it came from; a different source rebuilds the cache). It is written
to a temporary sibling and renamed, so a crash never leaves half a cache; a lock
file beside it lets one process build it while the others wait.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

import torch
from filelock import FileLock
from safetensors.torch import save_file

logger = logging.getLogger(__name__)

SHARD_BYTES = 1 << 30


def model_cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """Where dequantized GGUF models live: ``cache_dir``/models, ``cache_dir`` being radixgate's cache
    directory (EngineConfig.cache_dir; None: ~/.cache/radixgate)."""
    return Path(cache_dir or Path.home() / ".cache" / "radixgate") / "models"


def source_stamp(gguf_path: Path) -> dict:
    stat = gguf_path.stat()
    return {"path": str(gguf_path.resolve()), "size": stat.st_size, "mtime": int(stat.st_mtime)}


def is_cache_valid(cache_dir: Path, gguf_path: Path) -> bool:
    stamp_file = cache_dir / "source.json"
    has_weights = (cache_dir / "model.safetensors").is_file() or (cache_dir / "model.safetensors.index.json").is_file()
    if not (stamp_file.is_file() and has_weights):
        return False
    try:
        return json.loads(stamp_file.read_text()) == source_stamp(gguf_path)
    except (OSError, ValueError):
        return False


def export_state_dict(model) -> dict[str, torch.Tensor]:
    """The model's weights as contiguous CPU tensors, without the tied LM head (safetensors forbids aliases)."""
    state = {name: t.detach().to("cpu").contiguous() for name, t in model.state_dict().items()}
    if getattr(model.config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)
    return state


def save_weights(state: dict[str, torch.Tensor], directory: Path) -> None:
    """``state`` as model.safetensors, or as shards of at most SHARD_BYTES plus the index transformers reads."""
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name, tensor in state.items():
        nbytes = tensor.numel() * tensor.element_size()
        if shards[-1] and size + nbytes > SHARD_BYTES:
            shards.append({})
            size = 0
        shards[-1][name] = tensor
        size += nbytes
    if len(shards) == 1:
        save_file(shards[0], str(directory / "model.safetensors"), metadata={"format": "pt"})
        return
    weight_map = {}
    for k, shard in enumerate(shards, start=1):
        filename = f"model-{k:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(directory / filename), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(shard, filename))
    total = sum(t.numel() * t.element_size() for t in state.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))


def build_gguf_cache(gguf_path: Path, cache_dir: Path) -> Path:
    """Dequantize ``gguf_path`` (transformers shows a progress bar) into ``cache_dir``; returns cache_dir."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    logger.info("dequantizing %s into %s (first load only)", gguf_path, cache_dir)
    model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    cache_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{cache_dir.name}-", dir=cache_dir.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; the cache is an ordinary directory
    try:
        save_weights(export_state_dict(model), tmp)
        config = model.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config.save_pretrained(str(tmp))
        if getattr(model, "generation_config", None) is not None:
            model.generation_config.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        (tmp / "source.json").write_text(json.dumps(source_stamp(gguf_path)))
        if cache_dir.exists():
            shutil.rmtree(cache_dir)
        tmp.rename(cache_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return cache_dir


def gguf_cache_dir(gguf_path: Path, cache_root: Path | None = None) -> Path:
    """Where ``gguf_path``'s HF directory lives (one for every dtype: the weights are stored in fp32)."""
    # one folder per GGUF path, so two installs of the same file (two venvs) do not rebuild each other's
    path_key = hashlib.sha1(str(gguf_path.resolve()).encode()).hexdigest()[:10]
    return (cache_root or model_cache_root()) / f"{gguf_path.stem}-{path_key}"


def is_gguf_cached(gguf_path: Path, cache_root: Path | None = None) -> bool:
    """Whether ensure_gguf_cache(gguf_path, cache_root) would only read the cache (nothing to dequantize)."""
    return is_cache_valid(gguf_cache_dir(gguf_path, cache_root), gguf_path)


def ensure_gguf_cache(gguf_path: Path, cache_root: Path | None = None) -> Path:
    """The HF directory for ``gguf_path``, dequantizing it on the first call."""
    cache_dir = gguf_cache_dir(gguf_path, cache_root)
    if is_cache_valid(cache_dir, gguf_path):
        return cache_dir
    cache_dir.parent.mkdir(parents=True, exist_ok=True)
    # one process dequantizes; the others (two test workers, two servers started at once) wait and read it,
    # rather than replacing a cache that the first one is already loading
    with FileLock(cache_dir.parent / f".{cache_dir.name}.lock"):
        if not is_cache_valid(cache_dir, gguf_path):
            build_gguf_cache(gguf_path, cache_dir)
    return cache_dir
