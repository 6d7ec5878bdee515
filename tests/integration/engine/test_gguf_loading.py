"""The default model's GGUF: dequantized once into the cache folder, then loaded from it."""

import time

import pytest
import torch

from engine.models.loader import load_model, locate_alias


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
