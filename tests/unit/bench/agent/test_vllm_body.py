"""The agent rows as the peers get them: retrieved documents as a system message, tools never called, no radixgate
extras; and the bookkeeping of the HTTP passes."""

from bench.agent.plain import plain_body
from bench.agent.vllm_peer import hit_rate
from bench.http_peers import HttpRun, Reply, agreement

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def test_documents_follow_the_first_system_message_and_extras_are_dropped():
    body = {"model": "m", "max_tokens": 4, "canonicalize": False, "tools": TOOLS,
            "context": [{"id": "a", "text": "Doc A."}, "Doc B."],
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]}
    plain = plain_body(body)
    assert [m["role"] for m in plain["messages"]] == ["system", "system", "user"]
    assert plain["messages"][1]["content"] == "Retrieved documents:\n\nDoc A.\n\nDoc B."
    assert plain["tool_choice"] == "none" and plain["tools"] == TOOLS
    assert "context" not in plain and "canonicalize" not in plain
    assert body["messages"][0]["content"] == "Be brief." and len(body["messages"]) == 2  # the row is untouched


def test_a_body_without_documents_or_tools_passes_through():
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
    assert plain_body(body) == body


def test_summary_hit_rate_and_agreement_come_from_the_replies():
    run = HttpRun("x", 2.0, [Reply("a", 0.1, 100, 60), Reply("b", 0.3, 100, 0), Reply("c", 0.2, 50, 50)])
    summary = run.summary()
    assert summary["prefill_tokens"] == 40 + 100 + 0 and summary["prompt_tokens"] == 250
    assert summary["ttft_ms_p50"] == 200 and summary["ttft_ms_p95"] == 300
    assert hit_rate(run) == 110 / 250
    other = HttpRun("y", 1.0, [Reply("a", 0, 0, 0), Reply("B", 0, 0, 0), Reply("c", 0, 0, 0)])
    assert agreement(run, other) == 2 / 3


def test_repeated_passes_run_on_fresh_tenants_and_report_median_walls(monkeypatch):
    """run_agent_vs_vllm's own bookkeeping, around stand-ins for the two servers: every radixgate pass under new
    tenants (cold caches), vLLM asked for the same number of passes, medians of the walls, the rest first-pass."""
    import bench.agent.run as agent_run
    import bench.server as server_module
    from bench.agent import vllm_peer

    created, passes = [], []

    class Server:
        url, admin_key = "http://stand-in", "admin"

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    class Admin:
        def __init__(self, url, key):
            pass

        def create_tenant(self, name):
            created.append(name)
            return f"key-{name}"

        def chat(self, key, body):
            return {}

        def close(self):
            pass

    walls = iter([5.0, 3.0, 4.0])

    def replay(name, url, headers, bodies, *, concurrency, progress=None):
        passes.append({h["Authorization"] for h in headers})
        return HttpRun(name, next(walls), [Reply("same", 0.1, 100, 60 if len(passes) == 1 else 0)])

    def vllm_passes(bodies, *, repeat, **kwargs):
        return [HttpRun(f"v{i}", wall, [Reply("same" if i == 0 else "other", 0.2, 100, 10)])
                for i, wall in enumerate([9.0, 11.0, 10.0][:repeat])]

    monkeypatch.setattr(server_module, "ServerProcess", lambda env: Server())
    monkeypatch.setattr(agent_run, "GatewayClient", Admin)
    monkeypatch.setattr(vllm_peer, "replay_chat", replay)
    monkeypatch.setattr(vllm_peer, "run_vllm_http", vllm_passes)
    rows = [{"tenant": "a", "body": {"messages": [{"role": "user", "content": "Hi"}]}},
            {"tenant": "b", "body": {"messages": [{"role": "user", "content": "Yo"}]}}]
    loaded = type("Loaded", (), {"path": "/m", "model_id": "m"})()
    result = vllm_peer.run_agent_vs_vllm(rows, loaded, dtype="bfloat16", num_threads=2, concurrency=1,
                                         vllm_python="python", vllm_url=None, repeat=3)
    assert len(passes) == 3 and len(set.union(*passes)) == 3 * 2  # two tenants per pass, never reused
    ours, theirs = result["peers"]
    assert (ours["wall_s"], ours["wall_s_all"]) == (4.0, [5.0, 3.0, 4.0])
    assert (theirs["wall_s"], theirs["wall_s_all"]) == (10.0, [9.0, 11.0, 10.0])
    assert ours["hit_rate"] == 0.6 and theirs["hit_rate"] == 0.1  # the first pass's
    assert result["answer_agreement"] == 1.0 and result["repeat"] == 3
    assert result["wall_ratio_vs_vllm"] == 0.4
