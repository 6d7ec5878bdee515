"""Metrics: per-app registry, per-tenant counters, histograms, engine gauges, log-queue series."""

from prometheus_client.parser import text_string_to_metric_families

from gateway.insight.metrics import Metrics


def samples(metrics: Metrics) -> dict:
    body, content_type = metrics.render()
    assert content_type.startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def test_requests_and_tokens_are_counted_per_tenant_and_status():
    metrics = Metrics()
    metrics.observe_request("acme", 100, 60, 0.05, 0.5, "ok")
    metrics.observe_request("acme", 50, 0, None, 0.2, "error")
    metrics.observe_request("zen", 10, 10, 0.01, 0.1, "ok")
    got = samples(metrics)
    assert got[("radixgate_requests_total", (("status", "ok"), ("tenant", "acme")))] == 1
    assert got[("radixgate_requests_total", (("status", "error"), ("tenant", "acme")))] == 1
    assert got[("radixgate_prompt_tokens_total", (("tenant", "acme"),))] == 150
    assert got[("radixgate_cached_tokens_total", (("tenant", "acme"),))] == 60
    assert got[("radixgate_ttft_seconds_count", ())] == 2  # the failed request had no first token
    assert got[("radixgate_latency_seconds_count", ())] == 3
    assert got[("radixgate_ttft_seconds_bucket", (("le", "0.05"),))] == 2


def test_engine_stats_fill_the_cache_gauges_from_the_nested_cache_dict():
    metrics = Metrics()
    metrics.set_engine_stats({"num_running": 1, "cache": {
        "cached_tokens": 4096, "pinned_tokens": 512, "evictable_tokens": 1024,
        "evicted_tokens": 320, "evicted_nodes": 7}})
    got = samples(metrics)
    assert got[("radixgate_engine_cached_tokens", ())] == 4096
    assert got[("radixgate_engine_pinned_tokens", ())] == 512
    assert got[("radixgate_engine_evictable_tokens", ())] == 1024
    assert got[("radixgate_engine_evictions", ())] == 7
    assert got[("radixgate_engine_evicted_tokens", ())] == 320


def test_speculation_stats_fill_their_gauges_and_stay_absent_while_it_is_off():
    metrics = Metrics()
    metrics.set_engine_stats({"speculation": None})
    assert samples(metrics)[("radixgate_speculation_draft_tokens", ())] == 0
    metrics.set_engine_stats({"speculation": {"verify_steps": 40, "draft_tokens": 210, "accepted_tokens": 96,
                                              "acceptance": 0.457}})
    got = samples(metrics)
    assert got[("radixgate_speculation_verify_steps", ())] == 40
    assert got[("radixgate_speculation_draft_tokens", ())] == 210
    assert got[("radixgate_speculation_accepted_tokens", ())] == 96


def test_log_queue_depth_and_dropped_rows_follow_the_writer_totals():
    metrics = Metrics()
    metrics.set_log_queue(depth=12, dropped=3)
    metrics.set_log_queue(depth=4, dropped=5)
    metrics.set_log_queue(depth=0, dropped=5)
    got = samples(metrics)
    assert got[("radixgate_log_queue_depth", ())] == 0
    assert got[("radixgate_log_dropped_rows_total", ())] == 5


def test_two_instances_never_share_series():
    first, second = Metrics(), Metrics()
    first.observe_request("acme", 1, 1, 0.1, 0.1, "ok")
    assert ("radixgate_requests_total", (("status", "ok"), ("tenant", "acme"))) not in samples(second)
