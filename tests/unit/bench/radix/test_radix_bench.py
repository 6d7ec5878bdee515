"""bench radix on small generated traces (no sglang needed)."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from bench.radix.run import RESULT_KEYS, replay, run_radixgate, tree_memory_bytes
from bench.workloads.trace import TraceShape, generate_trace, load_trace
from gateway.cli import app

SMALL = TraceShape(num_requests=80, num_tenants=3, sys_len=64, num_docs=12, doc_len=32, hist_max=20, question_len=8, seed=3)


@pytest.fixture(scope="module")
def trace():
    return generate_trace(SMALL)


def reference_hit_rate(trace, page_size):
    """Unbounded cache, match-then-insert: hits are the longest cached page-aligned prefix."""
    cached = set()
    hits = total = 0
    for i in range(trace.num_requests):
        tokens = tuple(trace.request(i).tolist())
        tenant = int(trace.tenant[i])
        aligned = len(tokens) // page_size * page_size
        length = 0
        while length < aligned and (tenant, tokens[: length + page_size]) in cached:
            length += page_size
        hits += length
        total += len(tokens)
        cached.update((tenant, tokens[:end]) for end in range(page_size, aligned + 1, page_size))
    return hits / total


def test_generated_trace_has_the_shared_shape(trace):
    assert trace.num_requests == 80 and trace.tokens.dtype == np.int32
    lengths = np.diff(trace.offsets)
    assert lengths.min() >= 64 + 32 + 8 and lengths.max() <= 64 + 3 * 32 + 20 + 8
    assert set(trace.tenant.tolist()) <= {0, 1, 2}
    assert np.array_equal(generate_trace(SMALL).tokens, trace.tokens)  # seeded


def test_trace_save_load_round_trip(trace, tmp_path):
    path = tmp_path / "t.npz"
    trace.save(path)
    loaded = load_trace(path)
    assert np.array_equal(loaded.tokens, trace.tokens) and np.array_equal(loaded.offsets, trace.offsets)
    assert loaded.meta["num_requests"] == 80


@pytest.mark.parametrize("page_size", [1, 4, 16])
def test_replay_hit_rate_equals_reference(trace, page_size):
    result, cache = replay(trace, page_size, None, progress=False)
    assert result["hit_rate"] == pytest.approx(reference_hit_rate(trace, page_size), abs=1e-12)
    assert result["requests"] == 80 and result["peak_nodes"] == cache.num_nodes > 0
    assert tree_memory_bytes(cache) > 4 * cache.num_cached_pages


def test_replay_under_capacity_evicts_and_keeps_pool_consistent(trace):
    unbounded, _ = replay(trace, 4, None, progress=False)
    bounded, cache = replay(trace, 4, 600, progress=False)
    assert cache.num_evicted_pages > 0
    assert bounded["hit_rate"] < unbounded["hit_rate"]
    assert cache.num_cached_pages == cache.pool.num_referenced_pages <= 150


def test_capacity_below_longest_request_is_refused(trace):
    with pytest.raises(ValueError, match="below the longest request"):
        replay(trace, 1, 10, progress=False)


def test_run_reports_medians_and_every_key(trace):
    result = run_radixgate(trace, 2, None, 3, progress=False)
    assert set(RESULT_KEYS) <= set(result) and result["repeat"] == 3 and len(result["runs"]) == 3
    rates = sorted(run["requests_per_s"] for run in result["runs"])
    assert result["requests_per_s"] == rates[1]


def test_cli_prints_table_and_writes_json(tmp_path):
    out = tmp_path / "radix.json"
    run = CliRunner().invoke(
        app, ["bench", "radix", "--num-requests", "40", "--page-size", "16", "--json", str(out), "--no-progress"]
    )
    assert run.exit_code == 0, run.output
    assert "requests_per_s" in run.output and "hit_rate" in run.output
    data = json.loads(out.read_text())
    assert set(data) == set(RESULT_KEYS) | {"details"}
    assert data["requests"] == 40 and data["page_size"] == 16 and data["details"]["repeat"] == 1


def test_cli_rejects_unknown_compare():
    run = CliRunner().invoke(app, ["bench", "radix", "--num-requests", "5", "--compare", "vllm", "--no-progress"])
    assert run.exit_code != 0
