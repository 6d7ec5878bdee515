"""vLLM as an accuracy candidate: which of vLLM's logprob rows are the teacher-forced ones (the child script,
over a stand-in ``vllm`` module), and what reaches the bench from the child process (a stand-in child). vLLM's
CPU build lives in its own venv, never in the test extra; `radixgate bench accuracy --vs vllm` runs the real one."""

import json
import sys
import types
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from bench.accuracy import vllm_child, vllm_peer
from bench.accuracy.run import Reference, figures

VOCAB = 8


@dataclass
class Logprob:
    logprob: float


def after(token: int) -> dict:
    """The stand-in model's full next-token distribution after ``token``: most mass on (token + 1) % VOCAB."""
    logits = np.full(VOCAB, -4.0)
    logits[(token + 1) % VOCAB] = 4.0
    logp = logits - np.log(np.exp(logits).sum())
    return {t: Logprob(float(logp[t])) for t in range(VOCAB)}


def fake_vllm(calls: list) -> types.ModuleType:
    module = types.ModuleType("vllm")

    class LLM:
        def __init__(self, **kwargs):
            calls.append(("init", kwargs))
            self.llm_engine = types.SimpleNamespace(model_config=types.SimpleNamespace(get_vocab_size=lambda: VOCAB))

        def generate(self, prompts, params, use_tqdm=True):
            outs = []
            for prompt in prompts if isinstance(prompts, list) else [prompts]:
                ids, generated = list(prompt["prompt_token_ids"]), []
                for _ in range(params.max_tokens):
                    token = (([*ids, *generated])[-1] + 1) % VOCAB
                    if token == 0 and len(generated) < getattr(params, "min_tokens", 0):
                        token = 1  # vLLM's min_tokens bans the end of sequence (0 here) until then
                    generated.append(token)
                sampled = [after(([*ids, *generated])[i - 1]) for i in range(len(ids), len(ids) + len(generated))]
                prompt_logprobs = [None] + [after(ids[j - 1]) for j in range(1, len(ids))]
                wants_prompt = getattr(params, "prompt_logprobs", None)
                wants_sampled = getattr(params, "logprobs", None)
                outs.append(types.SimpleNamespace(
                    prompt_logprobs=prompt_logprobs if wants_prompt == -1 else None,
                    outputs=[types.SimpleNamespace(token_ids=generated, logprobs=sampled if wants_sampled else None)]))
            return outs

    module.LLM = LLM
    module.SamplingParams = lambda **kwargs: types.SimpleNamespace(**kwargs)
    module.TokensPrompt = lambda prompt_token_ids: {"prompt_token_ids": prompt_token_ids}
    return module


def test_the_child_keeps_the_rows_that_predict_each_teacher_token(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setitem(sys.modules, "vllm", fake_vllm(calls))
    request, out = tmp_path / "request.json", tmp_path / "out.npz"
    # teacher tokens that the stand-in would not pick: the rows must follow the teacher, not the model
    request.write_text(json.dumps({"model_dir": "/m", "dtype": "bfloat16", "prompts": [[1, 2, 3], [5]],
                                   "teacher": [[4, 6, 6], [2, 7, 1]]}))
    vllm_child.main(str(request), str(out))
    found = np.load(out)
    assert found["forced"].shape == (2, 3, VOCAB)
    assert found["forced"][0].argmax(-1).tolist() == [4, 5, 7]  # after 3, then after teacher 4 and 6
    assert found["forced"][1].argmax(-1).tolist() == [6, 3, 0]  # after 5, 2, 7
    assert np.allclose(np.exp(found["forced"]).sum(-1), 1.0, atol=1e-5)  # full distributions, nothing -inf
    assert found["tokens"].tolist() == [[4, 5, 6], [6, 7, 0]]  # free-running greedy, through end of sequence
    init = calls[0][1]
    assert init["max_logprobs"] == -1 and init["enable_prefix_caching"] is False and init["dtype"] == "bfloat16"


def test_a_partial_position_stays_minus_infinity_outside_what_vllm_returned():
    row = vllm_child.dense({2: Logprob(-0.1), 5: Logprob(-2.5)}, VOCAB)
    assert row[2] == np.float32(-0.1) and row[5] == np.float32(-2.5)
    assert np.isinf(row[[0, 1, 3, 4, 6, 7]]).all()


STAND_IN_CHILD = """
import json, sys
import numpy as np
request = json.load(open(sys.argv[2]))
json.dump(request, open(sys.argv[2] + ".seen", "w"))
if request["dtype"] == "float32":
    print("RuntimeError: no float32 kernels here", flush=True)
    sys.exit(3)
teacher = np.array(request["teacher"])
forced = np.log(np.full(teacher.shape + (8,), 0.02))
for i, row in enumerate(teacher):
    forced[i, np.arange(len(row)), row] = np.log(0.86)
    print(f"progress {i + 1}", flush=True)
np.savez(sys.argv[3], forced=forced.astype(np.float32), tokens=teacher)
"""


@pytest.fixture
def stand_in_python(tmp_path):
    """An executable that, given the child's arguments (script, request, out), runs the stand-in child instead."""
    child = tmp_path / "child.py"
    child.write_text(STAND_IN_CHILD)
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{child}" "$@"\n')
    python.chmod(0o755)
    return str(python)


def reference() -> Reference:
    tokens = [[1, 2, 3], [4, 5, 6]]
    logits = torch.full((2, 3, VOCAB), -3.0)
    for i, row in enumerate(tokens):
        logits[i, torch.arange(3), torch.tensor(row)] = 3.0
    return Reference(prompts=[[7, 7], [0]], tokens=tokens, logits=logits)


def test_the_candidate_sends_the_reference_and_reads_back_distributions_and_progress(stand_in_python, tmp_path):
    seen = []
    found = vllm_peer.vllm_candidate(stand_in_python, tmp_path / "model", torch.bfloat16, reference(), 2,
                                     progress=lambda label, done: seen.append((label, done)))
    assert seen == [("vLLM bfloat16", 1), ("vLLM bfloat16", 2)]
    assert found["forced_logits"].shape == (2, 3, VOCAB) and found["tokens"] == [[1, 2, 3], [4, 5, 6]]
    own = figures(reference(), found["forced_logits"], found["tokens"])
    assert own.top1_agreement == 1.0 and own.greedy_exact == 1.0 and own.mean_kl > 0


def test_a_failing_child_is_an_error_with_its_last_words(stand_in_python, tmp_path):
    found = vllm_peer.vllm_candidate(stand_in_python, tmp_path / "model", torch.float32, reference(), 2)
    assert set(found) == {"error"}
    assert "exited with 3" in found["error"] and "no float32 kernels here" in found["error"]


def test_a_missing_python_is_an_error(tmp_path):
    found = vllm_peer.vllm_candidate(str(tmp_path / "nowhere" / "python"), tmp_path, torch.bfloat16, reference(), 2)
    assert set(found) == {"error"} and "FileNotFoundError" in found["error"]
