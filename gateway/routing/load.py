"""Load per backend: what this gateway has in flight there, and what the backend itself reports.

A backend's load is queued + running tokens. This gateway counts its own in-flight requests and
their prompt tokens (exact, no polling); the active checker (routing/monitor.py) adds what each node
reports: a radixgate node's GET /v1/load (its own in-flight tokens, every client's), or vLLM's and
SGLang's Prometheus gauges (running + waiting requests, converted to tokens at this gateway's mean
tokens per request there, since neither reports queued tokens). The load used for routing is the
larger of the two, so traffic from other gateways counts too.

Event-loop only (no locking).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

RUNNING_GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting", "sglang:num_running_reqs",
                  "sglang:num_queue_reqs")
GAUGE_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([0-9.eE+-]+)\s*$")
DEFAULT_TOKENS_PER_REQUEST = 1024
LOCAL_LOAD = "local"  # the name this gateway's own admitted requests are counted under (GET /v1/load)


@dataclass
class LoadTracker:
    num_in_flight: dict[str, int] = field(default_factory=dict)
    tokens_in_flight: dict[str, int] = field(default_factory=dict)
    reported_tokens: dict[str, int] = field(default_factory=dict)
    num_sent: dict[str, int] = field(default_factory=dict)
    tokens_sent: dict[str, int] = field(default_factory=dict)

    def begin(self, name: str, num_tokens: int = 0) -> None:
        self.num_in_flight[name] = self.num_in_flight.get(name, 0) + 1
        self.tokens_in_flight[name] = self.tokens_in_flight.get(name, 0) + num_tokens
        self.num_sent[name] = self.num_sent.get(name, 0) + 1
        self.tokens_sent[name] = self.tokens_sent.get(name, 0) + num_tokens

    def end(self, name: str, num_tokens: int = 0) -> None:
        count = self.num_in_flight.get(name, 0)
        if count <= 0:
            raise RuntimeError(f"end without begin for backend {name!r}")
        self.num_in_flight[name] = count - 1
        self.tokens_in_flight[name] = max(0, self.tokens_in_flight.get(name, 0) - num_tokens)

    def load(self, name: str) -> int:
        """Queued + running tokens at `name`: ours, or the node's own report when larger."""
        return max(self.tokens_in_flight.get(name, 0), self.reported_tokens.get(name, 0))

    def mean_tokens_per_request(self, name: str) -> int:
        sent = self.num_sent.get(name, 0)
        return self.tokens_sent.get(name, 0) // sent if sent else DEFAULT_TOKENS_PER_REQUEST

    def report(self, name: str, num_tokens: int) -> None:
        self.reported_tokens[name] = max(0, int(num_tokens))


def requests_from_metrics(text: str) -> int:
    """Running + waiting requests from a vLLM or SGLang Prometheus page (summed over label sets)."""
    total = 0.0
    for line in text.splitlines():
        match = GAUGE_LINE.match(line)
        if match and match.group(1) in RUNNING_GAUGES:
            total += float(match.group(3))
    return int(total)
