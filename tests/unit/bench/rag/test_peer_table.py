"""bench rag's one table: each peer against radixgate in the same harness, the best peer, the serial floor."""

import pytest

from bench.rag.peer_table import (
    HTTP,
    IN_PROCESS,
    http_rows,
    in_process_rows,
    peer_table,
    serial_floor_s,
    vs_best_peer,
)

HTTP_RESULT = {
    "answer_agreement": 0.75,
    "peers": [
        {"name": "radixgate serve", "wall_s": 6.0, "ttft_ms_p50": 140.0, "prefill_tokens": 2912},
        {"name": "vLLM (CPU)", "wall_s": 10.0, "ttft_ms_p50": 230.0, "prefill_tokens": 3280},
    ],
}
IN_PROCESS_RESULT = {
    "wall_s_on": 4.0, "ttft_ms_median_on": 120.0, "prefill_tokens_on": 2912,
    "baselines": [
        {"name": "llama.cpp", "wall_s": 5.0, "outputs_match_radixgate": 0.5},
        {"name": "hf from scratch", "wall_s": 40.0, "outputs_match_radixgate": 1.0},
        {"name": "hf prefix-reuse", "error": "out of memory"},
    ],
}


def test_each_peer_is_measured_against_radixgate_in_its_own_harness():
    rows = http_rows(HTTP_RESULT) + in_process_rows(IN_PROCESS_RESULT)
    assert [(r.name, r.harness) for r in rows] == [
        ("radixgate serve", HTTP), ("vLLM (CPU)", HTTP), ("radixgate engine", IN_PROCESS),
        ("llama.cpp", IN_PROCESS), ("hf from scratch", IN_PROCESS), ("hf prefix-reuse", IN_PROCESS)]
    by_name = {r.name: r for r in rows}
    assert by_name["vLLM (CPU)"].ratio == pytest.approx(0.6)  # 6.0 s over HTTP vs 10.0 s
    assert by_name["llama.cpp"].ratio == pytest.approx(0.8)  # 4.0 s in-process vs 5.0 s
    assert by_name["hf from scratch"].ratio == pytest.approx(0.1)
    assert by_name["vLLM (CPU)"].same_answers == 0.75 and by_name["llama.cpp"].same_answers == 0.5
    assert by_name["radixgate serve"].ratio is None and by_name["radixgate engine"].ratio is None
    failed = by_name["hf prefix-reuse"]
    assert failed.wall_s is None and failed.ratio is None and failed.error == "out of memory"


def test_the_headline_is_radixgate_against_its_best_peer():
    rows = http_rows(HTTP_RESULT) + in_process_rows(IN_PROCESS_RESULT)
    assert vs_best_peer(rows) == pytest.approx(0.8)  # llama.cpp is the closest peer
    assert vs_best_peer(in_process_rows({**IN_PROCESS_RESULT, "baselines": []})) is None


def test_the_serial_floor_is_prefill_at_the_matmul_rate_plus_batch1_steps_at_the_bandwidth():
    limits = {"prefill_limit_tok_s": 1000.0, "batch1_decode_limit_tok_s": 100.0}
    # 2,000 prefill tokens: 2 s; 24 requests x 15 further tokens at 100 tok/s: 3.6 s
    assert serial_floor_s(2000, 24, 16, limits) == pytest.approx(5.6)


def test_the_table_reports_radixgate_over_the_floor_in_serial_mode_only():
    rows = http_rows(HTTP_RESULT) + in_process_rows(IN_PROCESS_RESULT)
    serial = peer_table(rows, mode="serial", floor_s=2.0)
    assert serial["floor_s"] == 2.0 and serial["in_process_over_floor"] == pytest.approx(2.0)
    assert serial["vs_best_peer"] == pytest.approx(0.8) and len(serial["rows"]) == 6
    assert "floor_s" not in peer_table(rows, mode="cold-group", floor_s=None)
