"""Model specs resolve to the right weights: local HF dir, hub id in the local cache, GGUF (cached)."""

import time
from pathlib import Path

import pytest
import torch
from tests.support.tiny_models import TINY_CONFIGS
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


def test_qwen2_stops_on_im_end_and_endoftext_even_when_its_configs_name_one(tmp_path):
    directory = tmp_path / "tiny-chatml-qwen"
    AutoModelForCausalLM.from_config(TINY_CONFIGS["qwen2-untied"]()).save_pretrained(str(directory))
    vocab = {f"w{i}": i for i in range(300)} | {"<unk>": 300, "<|endoftext|>": 301, "<|im_end|>": 302}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<|im_end|>").save_pretrained(
        str(directory))
    loaded = load_model(str(directory))
    assert {301, 302} <= set(loaded.eos_token_ids)
    assert 300 not in loaded.eos_token_ids  # no <unk> from a missing name
