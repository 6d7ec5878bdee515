"""bench decode on a tiny model with the real KVPool: shapes of the result, pages returned, CLI parsing."""

import pytest
import torch
import typer

from engine import KVPool
from engine.models.llama import ModelShape
from engine.runner import ModelRunner
from bench.decode.command import parse_batches
from bench.decode.run import decode_pass, run_decode_bench, run_prefill_bench


@pytest.fixture
def tiny_runner(make_tiny_model):
    reference, loaded = make_tiny_model("llama-tied")
    shape = ModelShape.from_config(loaded.config)
    pool = KVPool(64, 16, num_layers=shape.num_layers, num_kv_heads=shape.num_kv_heads, head_dim=shape.head_dim)
    return ModelRunner(loaded, pool, dtype=torch.float32, device="cpu"), reference


def test_decode_bench_reports_medians_and_returns_every_page(tiny_runner):
    runner, reference = tiny_runner
    free_before = runner.pool.num_free_pages
    result = run_decode_bench(runner, [1, 3], num_tokens=4, prompt_len=5, repeat=2, hf_model=reference)
    assert [row["batch"] for row in result["results"]] == [1, 3]
    for row in result["results"]:
        assert row["tok_s"] > 0 and row["hf_tok_s"] > 0 and len(row["tok_s_all"]) == 2
    prefill = run_prefill_bench(runner, prompt_len=40, repeat=1, hf_model=reference)
    assert prefill["tok_s"] > 0 and prefill["speedup_vs_hf"] > 0
    assert runner.pool.num_free_pages == free_before


def test_decode_pass_is_greedy_like_transformers(tiny_runner):
    runner, reference = tiny_runner
    prompts = [[5, 6, 7, 8], [9, 10, 11, 12]]
    _, _, generated = decode_pass(runner, prompts, 6, None, "")
    with torch.inference_mode():
        out = reference.generate(torch.tensor(prompts), max_new_tokens=7, do_sample=False, eos_token_id=None,
                                 pad_token_id=0)
    assert generated == out[:, 4:].tolist()


def test_parse_batches_rejects_garbage():
    assert parse_batches("1,8, 32") == [1, 8, 32]
    with pytest.raises(typer.BadParameter):
        parse_batches("1,x")
    with pytest.raises(typer.BadParameter):
        parse_batches("0")
