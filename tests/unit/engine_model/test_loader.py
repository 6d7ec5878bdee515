"""Model specs resolve to the right weights: local HF dir, hub id in the local cache, GGUF (cached)."""

import time
from pathlib import Path

import pytest
import torch
from conftest import TINY_CONFIGS
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

from engine.models.loader import load_model, locate_alias


def save_tiny_model(directory: Path) -> AutoModelForCausalLM:
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(TINY_CONFIGS["qwen2-untied"]())
    model.save_pretrained(str(directory))
    vocab = {f"w{i}": i for i in range(300)} | {"<unk>": 300, "</s>": 301}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="</s>").save_pretrained(str(directory))
    return model


def test_local_hf_directory_loads_weights_tokenizer_and_eos(tmp_path):
    model = save_tiny_model(tmp_path / "tiny-qwen")
    loaded = load_model(str(tmp_path / "tiny-qwen"))
    assert loaded.model_id == "tiny-qwen" and loaded.config.model_type == "qwen2"
    assert loaded.max_context == loaded.config.max_position_embeddings
    assert 301 in loaded.eos_token_ids
    assert loaded.tokenizer.eos_token == "</s>"
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict[name], tensor), name


def test_hub_id_resolves_from_the_local_cache_offline(tmp_path, monkeypatch):
    import huggingface_hub.constants as hub_constants

    snapshot = tmp_path / "hub" / "models--acme--tiny-qwen" / "snapshots" / "abc123"
    save_tiny_model(snapshot)
    (tmp_path / "hub" / "models--acme--tiny-qwen" / "refs").mkdir()
    (tmp_path / "hub" / "models--acme--tiny-qwen" / "refs" / "main").write_text("abc123")
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    loaded = load_model("acme/tiny-qwen")
    assert loaded.model_id == "acme/tiny-qwen" and loaded.path == snapshot
    with pytest.raises(FileNotFoundError):
        load_model("acme/not-cached")


def test_missing_paths_raise_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_model(str(tmp_path / "nope.gguf"))
    with pytest.raises(FileNotFoundError):
        load_model(str(tmp_path / "no-such-dir") + "/")


@pytest.mark.slow
def test_gguf_is_dequantized_once_then_loaded_from_the_cache(tmp_path, capsys):
    gguf = locate_alias("smollm2-135m")
    started = time.perf_counter()
    first = load_model(str(gguf), cache_dir=tmp_path)
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    second = load_model(str(gguf), cache_dir=tmp_path)
    second_s = time.perf_counter() - started
    with capsys.disabled():
        print(f"\nGGUF first load {first_s:.1f} s, cached load {second_s:.2f} s")
    (cache_dir,) = tmp_path.glob(f"{gguf.stem}-*")  # one folder per GGUF path
    assert (cache_dir / "model.safetensors").is_file()
    assert second_s < first_s
    assert first.config.num_hidden_layers == 30 and first.config.tie_word_embeddings
    assert first.tokenizer.chat_template and "<|im_start|>" in first.tokenizer.chat_template
    assert torch.equal(first.state_dict["model.layers.0.self_attn.q_proj.weight"],
                       second.state_dict["model.layers.0.self_attn.q_proj.weight"])
