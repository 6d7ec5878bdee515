"""The agent rows as vLLM gets them: retrieved documents as a system message, tools never called, no radixgate extras."""

from gateway.bench.agent.vllm_peer import hit_rate, vllm_body
from gateway.bench.http_peers import HttpRun, Reply, agreement

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def test_documents_follow_the_first_system_message_and_extras_are_dropped():
    body = {"model": "m", "max_tokens": 4, "canonicalize": False, "tools": TOOLS,
            "context": [{"id": "a", "text": "Doc A."}, "Doc B."],
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]}
    plain = vllm_body(body)
    assert [m["role"] for m in plain["messages"]] == ["system", "system", "user"]
    assert plain["messages"][1]["content"] == "Retrieved documents:\n\nDoc A.\n\nDoc B."
    assert plain["tool_choice"] == "none" and plain["tools"] == TOOLS
    assert "context" not in plain and "canonicalize" not in plain
    assert body["messages"][0]["content"] == "Be brief." and len(body["messages"]) == 2  # the row is untouched


def test_a_body_without_documents_or_tools_passes_through():
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
    assert vllm_body(body) == body


def test_summary_hit_rate_and_agreement_come_from_the_replies():
    run = HttpRun("x", 2.0, [Reply("a", 0.1, 100, 60), Reply("b", 0.3, 100, 0), Reply("c", 0.2, 50, 50)])
    summary = run.summary()
    assert summary["prefill_tokens"] == 40 + 100 + 0 and summary["prompt_tokens"] == 250
    assert summary["ttft_ms_p50"] == 200 and summary["ttft_ms_p95"] == 300
    assert hit_rate(run) == 110 / 250
    other = HttpRun("y", 1.0, [Reply("a", 0, 0, 0), Reply("B", 0, 0, 0), Reply("c", 0, 0, 0)])
    assert agreement(run, other) == 2 / 3
