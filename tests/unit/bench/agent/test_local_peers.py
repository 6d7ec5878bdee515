"""The in-process peers of bench agent around stand-ins: what llama.cpp's child sends back (its Llama is a
stand-in: llama-cpp-python is not in the test extra), and how every peer's result becomes one table row."""

import sys
import types

import pytest

from bench.agent import llamacpp_peer, peers


class FakeLlama:
    """Streams the prompt's last token + 1, + 2, ... as text; end of sequence (0) after three tokens."""

    def __init__(self):
        self.cache, self.evaluated, self.resets = None, 0, 0

    def set_cache(self, cache):
        self.cache = cache

    def reset(self):
        self.resets += 1

    def create_completion(self, prompt, max_tokens, temperature, top_k, stream):
        assert stream and temperature == 0.0 and top_k == 1 and isinstance(prompt, list)
        self.evaluated += len(prompt) - 1  # a stand-in for reuse: all but one prompt token computed
        for step in range(1, min(max_tokens, 3) + 1):
            yield {"choices": [{"text": f"<{prompt[-1] + step}>"}]}


class Sender:
    def __init__(self):
        self.sent = []

    def send(self, message):
        self.sent.append(message)


@pytest.fixture
def fake_llama(monkeypatch):
    llm = FakeLlama()
    monkeypatch.setattr(llamacpp_peer, "load_llama", lambda *args, **kwargs: llm)
    monkeypatch.setattr(llamacpp_peer, "_prompt_tokens_evaluated", lambda model: model.evaluated)
    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(LlamaRAMCache=lambda capacity_bytes: "ram"))
    return llm


def test_the_child_streams_each_row_with_its_own_limit_and_counts_only_timed_prefill(fake_llama):
    sender = Sender()
    llamacpp_peer._serve(sender, "m.gguf", [[1, 2, 3], [7, 8]], 5, 2, True, [5, 2], True)
    kind, result = sender.sent[-1]
    assert kind == "result" and [m for m in sender.sent if m[0] == "progress"] == [("progress", 1), ("progress", 2)]
    assert result["answers"] == ["<4><5><6>", "<9><10>"]  # stops at end of sequence, or at the row's max_tokens
    assert result["prefill_tokens"] == 2 + 1  # the warm-up's evaluation is not counted
    assert len(result["ttft_s"]) == 2 and all(0 <= t <= result["wall_s"] for t in result["ttft_s"])
    assert fake_llama.cache == "ram" and fake_llama.resets == 1  # the warm-up's context is dropped


def test_without_the_ram_cache_none_is_set(fake_llama):
    llamacpp_peer._serve(Sender(), "m.gguf", [[1, 2]], 4, 2, True, [4], False)
    assert fake_llama.cache is None


def test_the_table_puts_every_peer_beside_radixgate_serve(monkeypatch):
    from bench.agent import vllm_peer

    http = {"mode": "concurrency 1", "dtype": "bfloat16", "answer_agreement": 0.5, "radixgate_answers": ["a", "b"],
            "peers": [{"name": "radixgate serve (canonical)", "wall_s": 10.0, "ttft_ms_p50": 200.0,
                       "prefill_tokens": 50, "hit_rate": 0.75},
                      {"name": "vLLM (CPU)", "wall_s": 25.0, "ttft_ms_p50": 800.0, "prefill_tokens": 150,
                       "hit_rate": 0.25}]}
    asked = {}

    def http_passes(rows, loaded, **kwargs):
        asked.update(kwargs)
        return {**http, "peers": list(http["peers"])}

    def local(name, spec, loaded, prompts, max_tokens, **kwargs):
        asked.setdefault("prompts", prompts)
        asked.setdefault("max_tokens", max_tokens)
        if name == "llamacpp":
            return {"name": "llama.cpp", "error": "llama-cpp-python is not installed"}
        return {"name": "transformers", "wall_s": 40.0, "ttft_s": [0.3, 0.1, 0.2], "prefill_tokens": 6,
                "answers": ["a", "c"]}

    monkeypatch.setattr(vllm_peer, "run_agent_vs_vllm", http_passes)
    monkeypatch.setattr(peers, "run_local", local)
    tokenizer = types.SimpleNamespace(apply_chat_template=lambda messages, **kw: [1] * (3 + len(messages)))
    rows = [{"tenant": "t", "body": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}},
            {"tenant": "t", "body": {"messages": [{"role": "user", "content": "yo"}]}}]
    result = peers.run_agent_peers(rows, types.SimpleNamespace(tokenizer=tokenizer), "smollm2-135m",
                                   peers=["hf", "vllm", "llamacpp"], dtype="bfloat16", num_threads=2, concurrency=1,
                                   repeat=1)
    assert asked["with_vllm"] is True and asked["repeat"] == 1
    assert asked["prompts"] == [[1] * 4, [1] * 4] and asked["max_tokens"] == [4, 16]
    table = {row["name"]: row for row in result["table"]["rows"]}
    assert list(table) == ["radixgate serve (canonical)", "vLLM (CPU)", "llama.cpp", "transformers"]
    assert table["vLLM (CPU)"]["ratio"] == 0.4 and table["vLLM (CPU)"]["same_answers"] == 0.5
    assert table["llama.cpp"]["wall_s"] is None and "not installed" in table["llama.cpp"]["error"]
    hf = table["transformers"]
    assert (hf["ratio"], hf["ttft_ms_p50"], hf["same_answers"], hf["harness"]) == (0.25, 200.0, 0.5, "in-process")
    assert result["table"]["vs_best_peer"] == 0.4  # the largest ratio: against the fastest peer
    assert result["hit_rates"] == {"radixgate serve (canonical)": 0.75, "vLLM (CPU)": 0.25,
                                   "transformers": 0.25}
    assert "radixgate_answers" not in result


def test_an_unknown_peer_is_refused():
    with pytest.raises(ValueError, match="unknown peer sglang"):
        peers.run_agent_peers([], None, "m", peers=["sglang"], dtype="bfloat16", num_threads=1, concurrency=1,
                              repeat=1)
