"""llama.cpp as an accuracy candidate: which logits rows are the teacher-forced ones, and what reaches the
parent. The child's Llama is a stand-in here (llama-cpp-python is not in the test extra: it compiles for
~30 minutes); `radixgate bench accuracy --vs llamacpp` runs the real one."""

import numpy as np
import torch

from bench.accuracy import llamacpp_peer
from bench.accuracy.run import Reference

VOCAB = 8


class FakeLlama:
    """Row i of ``scores`` puts its mass on token (last fed token + 1) % VOCAB, as a tiny deterministic model."""

    def __init__(self):
        self.fed = []

    def reset(self):
        self.fed = []

    def eval(self, tokens):
        self.fed += list(tokens)

    @property
    def scores(self):
        return np.stack([np.eye(VOCAB, dtype=np.float32)[(t + 1) % VOCAB] * 10 for t in self.fed])

    def generate(self, prompt, **kwargs):
        self.reset()
        self.eval(prompt)
        while True:
            token = (self.fed[-1] + 1) % VOCAB
            yield token
            self.eval([token])


class Sender:
    def __init__(self):
        self.sent = []

    def send(self, message):
        self.sent.append(message)


def test_the_forced_rows_are_those_that_predict_each_reference_token(monkeypatch):
    monkeypatch.setattr(llamacpp_peer, "load_llama", lambda *args, **kwargs: FakeLlama())
    sender = Sender()
    prompts, forced = [[1, 2, 3], [5]], [[4, 6, 6], [6, 7, 1]]
    llamacpp_peer._measure(sender, "model.gguf", prompts, 3, 1, True, forced)
    kind, result = sender.sent[-1]
    assert kind == "result" and [m for m in sender.sent if m[0] == "progress"] == [("progress", 1), ("progress", 2)]
    # prompt [1, 2, 3] then forced [4, 6]: rows after 3, 4, 6 predict 4, 5, 7
    assert [row.argmax() for row in result["forced_logits"][0]] == [4, 5, 7]
    assert [row.argmax() for row in result["forced_logits"][1]] == [6, 7, 0]  # after 5, 6, 7
    assert result["tokens"] == [[4, 5, 6], [6, 7, 0]]


def test_the_candidate_stacks_the_childs_logits_and_passes_errors_on(monkeypatch):
    reference = Reference(prompts=[[1], [2]], tokens=[[3, 4], [5, 6]], logits=torch.zeros(2, 2, VOCAB))
    rows = [np.ones((2, VOCAB), dtype=np.float32), np.zeros((2, VOCAB), dtype=np.float32)]
    seen = {}

    def fake_run(gguf, work, args, extra, *, progress):
        prompts, num_tokens, _threads = args
        seen.update(prompts=prompts, num_tokens=num_tokens, forced=extra[0])
        return {"name": "llama.cpp", "forced_logits": rows, "tokens": [[3, 4], [5, 0]]}

    monkeypatch.setattr(llamacpp_peer, "run_with_fallback", fake_run)
    found = llamacpp_peer.llamacpp_candidate("model.gguf", reference, 2)
    assert seen == {"prompts": [[1], [2]], "num_tokens": 2, "forced": [[3, 4], [5, 6]]}
    assert found["forced_logits"].shape == (2, 2, VOCAB) and found["forced_logits"][0].sum() == 2 * VOCAB
    monkeypatch.setattr(llamacpp_peer, "run_with_fallback", lambda *a, **k: {"name": "llama.cpp", "error": "boom"})
    assert llamacpp_peer.llamacpp_candidate("model.gguf", reference, 2)["error"] == "boom"
