"""Prometheus metrics for one app instance, on its own CollectorRegistry (no process-global state,
so several apps in one test process never collide).

Series (all prefixed `radixgate_`):
  requests_total{tenant,status}          prompt_tokens_total{tenant}    cached_tokens_total{tenant}
  ttft_seconds / latency_seconds          histograms (no tenant label: bounded cardinality)
  engine_cached_tokens, engine_pinned_tokens, engine_evictable_tokens, engine_evictions (evicted nodes),
  engine_evicted_tokens                   gauges: a snapshot of Engine.stats() (its "cache" dict)
  host_tier_capacity_tokens, host_tier_used_tokens, host_tier_hit_tokens, host_tier_loads,
  host_tier_bytes_copied, host_tier_copy_seconds, host_tier_evicted_pages
                                          gauges: Engine.stats()["host_tier"] (absent while the tier is off)
  host_cached_tokens_total{tenant}        prompt tokens copied in from the host tier (part of cached_tokens)
  speculation_verify_steps, speculation_draft_tokens, speculation_accepted_tokens
                                          gauges: Engine.stats()["speculation"] (absent while it is off)
  log_queue_depth (gauge), log_dropped_rows_total (counter)
"""

from __future__ import annotations

import threading

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

TIME_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
ENGINE_GAUGES = {
    # gauge suffix -> keys the engine's stats() may use for it (flat, or under "cache"/"radix")
    "cached_tokens": ("cached_tokens", "num_cached_tokens"),
    "pinned_tokens": ("pinned_tokens", "num_pinned_tokens"),
    "evictable_tokens": ("evictable_tokens", "num_evictable_tokens"),
    "evictions": ("evictions", "num_evictions", "evicted_nodes"),
    "evicted_tokens": ("evicted_tokens", "num_evicted_tokens"),
}
HOST_TIER_GAUGES = {  # gauge suffix -> key of Engine.stats()["host_tier"]
    "capacity_tokens": "capacity_tokens",
    "used_tokens": "used_tokens",
    "hit_tokens": "hit_tokens",
    "loads": "loads",
    "bytes_copied": "bytes_copied",
    "copy_seconds": "copy_s",
    "evicted_pages": "evicted_pages",
}
SPECULATION_GAUGES = ("verify_steps", "draft_tokens", "accepted_tokens")  # keys of Engine.stats()["speculation"]


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.requests = Counter("radixgate_requests", "Chat requests", ["tenant", "status"], registry=r)
        self.prompt_tokens = Counter("radixgate_prompt_tokens", "Prompt tokens", ["tenant"], registry=r)
        self.cached_tokens = Counter("radixgate_cached_tokens", "Prompt tokens served from cache", ["tenant"], registry=r)
        self.ttft = Histogram("radixgate_ttft_seconds", "Time to first token", buckets=TIME_BUCKETS_S, registry=r)
        self.latency = Histogram("radixgate_latency_seconds", "Request latency", buckets=TIME_BUCKETS_S, registry=r)
        self.engine = {
            name: Gauge(f"radixgate_engine_{name}", f"Engine radix cache: {name.replace('_', ' ')}", registry=r)
            for name in ENGINE_GAUGES
        }
        self.host_tier = {
            name: Gauge(f"radixgate_host_tier_{name}", f"Host KV tier: {name.replace('_', ' ')}", registry=r)
            for name in HOST_TIER_GAUGES
        }
        self.speculation = {
            name: Gauge(f"radixgate_speculation_{name}", f"Prompt-lookup speculation: {name.replace('_', ' ')}",
                        registry=r)
            for name in SPECULATION_GAUGES
        }
        self.host_cached_tokens = Counter("radixgate_host_cached_tokens", "Prompt tokens copied in from the host tier",
                                          ["tenant"], registry=r)
        self.log_queue_depth = Gauge("radixgate_log_queue_depth", "Request-log rows waiting to be written", registry=r)
        self.log_dropped = Counter("radixgate_log_dropped_rows", "Request-log rows dropped", registry=r)
        self._num_dropped_seen = 0
        self._lock = threading.Lock()

    def observe_request(
        self,
        tenant: str,
        prompt_tokens: int,
        cached_tokens: int,
        ttft_s: float | None,
        latency_s: float | None,
        status: str,
        host_cached_tokens: int = 0,
    ) -> None:
        """Record one finished request (status: "ok" / "error" or an error code)."""
        self.requests.labels(tenant=tenant, status=status).inc()
        self.prompt_tokens.labels(tenant=tenant).inc(max(0, prompt_tokens))
        self.cached_tokens.labels(tenant=tenant).inc(max(0, cached_tokens))
        if host_cached_tokens > 0:
            self.host_cached_tokens.labels(tenant=tenant).inc(host_cached_tokens)
        if ttft_s is not None:
            self.ttft.observe(ttft_s)
        if latency_s is not None:
            self.latency.observe(latency_s)

    def set_engine_stats(self, stats: dict) -> None:
        """Copy the engine's cache statistics into the gauges; missing keys leave a gauge unchanged."""
        sources = [stats] + [stats[key] for key in ("cache", "radix", "radix_cache") if isinstance(stats.get(key), dict)]
        for name, keys in ENGINE_GAUGES.items():
            value = first_number(sources, keys)
            if value is not None:
                self.engine[name].set(value)
        for section, gauges, keys in (("host_tier", self.host_tier, HOST_TIER_GAUGES),
                                      ("speculation", self.speculation, {k: k for k in SPECULATION_GAUGES})):
            part = stats.get(section)
            if isinstance(part, dict):
                for name, key in keys.items():
                    value = first_number([part], (key,))
                    if value is not None:
                        gauges[name].set(value)

    def set_log_queue(self, depth: int, dropped: int) -> None:
        """`dropped` is the writer's running total; the counter advances by the difference."""
        self.log_queue_depth.set(depth)
        with self._lock:
            delta = dropped - self._num_dropped_seen
            self._num_dropped_seen = max(self._num_dropped_seen, dropped)
        if delta > 0:
            self.log_dropped.inc(delta)

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type, for GET /metrics."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def first_number(sources: list[dict], keys: tuple[str, ...]) -> float | None:
    for source in sources:
        for key in keys:
            value = source.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
    return None
