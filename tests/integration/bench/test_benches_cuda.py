"""`radixgate bench decode|rag|accuracy --device cuda` on the real model: every side runs on the GPU and the
benches' claims hold there. Skipped without CUDA."""

import pytest
import torch

from engine import EngineConfig
from engine.runner import ModelRunner

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


@pytest.fixture(scope="module")
def cuda_runner():
    return ModelRunner.from_spec("smollm2-135m", dtype="bfloat16", device="cuda", num_pages=512, page_size=16)


def test_decode_bench_times_radixgate_and_transformers_on_the_gpu(cuda_runner):
    from bench.decode.limits import machine_limits
    from bench.decode.run import run_decode_bench, run_prefill_bench

    hf_model = cuda_runner.loaded_model.build_hf_model(cuda_runner.dtype).to(cuda_runner.device)
    result = run_decode_bench(cuda_runner, [1, 4], num_tokens=4, prompt_len=16, repeat=1, hf_model=hf_model)
    assert result["device"].startswith("cuda")
    assert all(row["tok_s"] > 0 and row["hf_tok_s"] > 0 for row in result["results"])
    prefill = run_prefill_bench(cuda_runner, prompt_len=256, repeat=1, hf_model=hf_model)
    assert prefill["tok_s"] > 0 and prefill["hf_tok_s"] > 0
    limits = machine_limits(cuda_runner.shape, cuda_runner.dtype, "none", cuda_runner.device)
    # any GPU this runs on reads memory faster than 100 GB/s; a CPU-side measurement would rarely reach it
    assert limits["memory_bandwidth_gb_s"] > 100 and limits["batch1_decode_limit_tok_s"] > 0


def test_rag_bench_on_the_gpu_reuses_the_prefix_with_identical_outputs(cuda_runner):
    from bench.rag.baselines import run_baselines
    from bench.rag.run import run_rag_bench
    from bench.workloads.rag import generate_rag_workload

    workload = generate_rag_workload(cuda_runner.tokenizer, num_requests=6, system_tokens=240, document_tokens=120,
                                     max_new_tokens=4)
    config = EngineConfig(model="smollm2-135m", dtype="bfloat16", device="cuda", page_size=16, max_batch_tokens=512)
    result = run_rag_bench(cuda_runner, config, workload)
    assert result["outputs_identical"]
    assert result["prefill_tokens_on"] <= result["prefill_tokens_off"] - 5 * (workload.num_prefix_tokens - 16)
    reference = result.pop("_outputs")
    baselines = run_baselines(["hf"], cuda_runner, workload, "smollm2-135m", repeat=1, wall_s_on=result["wall_s_on"],
                              reference=reference)
    assert [b["name"] for b in baselines] == ["hf from scratch", "hf prefix-reuse"]
    assert all(b["wall_s"] > 0 for b in baselines)


def test_accuracy_bench_on_the_gpu_compares_like_with_like(smollm):
    from bench.accuracy.prompts import PROMPTS
    from bench.accuracy.run import run_accuracy

    result = run_accuracy(smollm, PROMPTS[:4], num_tokens=4, dtypes=(torch.float32, torch.bfloat16), device="cuda")
    assert result["device"].startswith("cuda")
    rows = {(r["engine"], r["dtype"]): r for r in result["rows"]}
    assert set(rows) == {(e, d) for e in ("transformers", "radixgate") for d in ("float32", "bfloat16")}
    assert result["radixgate_no_further_than_transformers"]["float32"]
    assert rows["radixgate", "bfloat16"]["mean_kl"] <= 0.05  # nats; test_cuda_path's bound for bfloat16 logits
