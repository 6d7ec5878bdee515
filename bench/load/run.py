"""The load bench: `num_clients` streaming clients over mixed tenants and templates for two rounds.

Each client loops: pick the next tenant (round robin over TENANTS, each with its own system
prompt and template), stream a chat completion with usage, and record its status, its TTFT
(first content chunk) and whether the stream ended with a usage chunk and [DONE]. After each
round the bench waits until the engine is idle and reads /admin/stats: the KV pool must balance
(free + evictable + pinned pages == pool pages: no page held by a finished request, no lock left)
and the server's RSS is sampled. Invariants (`violations`): no 5xx other than 503, every 200
stream complete, pages balanced after each round, RSS growth from round 1 to round 2 under 15%.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import uuid
from dataclasses import dataclass, field

import httpx

from bench.progress import Progress

TENANTS = (  # (name, template, system prompt)
    ("agent", "agent", "You are the operations agent of a small web shop. Use tools when asked for order data."),
    ("rag", "rag", "You answer questions about the shop's return policy from the documents given, briefly."),
    ("chat", "chat", "You are a friendly assistant. Answer in one short sentence."),
    ("raw", None, "You are a terse assistant for a bicycle repair shop. Answer in a few words."),
)
QUESTIONS = ("What can you help me with?", "How long does a refund take?", "Say hello.", "Name one bicycle part.")
MAX_RSS_GROWTH = 0.15


@dataclass
class RoundResult:
    statuses: list[int] = field(default_factory=list)
    ttft_s: dict[str, list[float]] = field(default_factory=dict)
    num_incomplete: int = 0
    num_completion_tokens: int = 0
    seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, tenant: str, status: int, ttft_s: float | None, is_complete: bool, num_tokens: int) -> None:
        with self.lock:
            self.statuses.append(status)
            if status == 200:
                self.num_incomplete += not is_complete
                self.num_completion_tokens += num_tokens
                if ttft_s is not None:
                    self.ttft_s.setdefault(tenant, []).append(ttft_s)

    def summary(self) -> dict:
        num = len(self.statuses)
        per_tenant = {
            name: {"num": len(values), "ttft_p50_s": round(statistics.median(values), 3),
                   "ttft_p99_s": round(percentile(values, 0.99), 3)}
            for name, values in sorted(self.ttft_s.items())
        }
        return {
            "num_requests": num, "seconds": round(self.seconds, 2),
            "requests_per_s": round(num / self.seconds, 2) if self.seconds else 0.0,
            "completion_tokens_per_s": round(self.num_completion_tokens / self.seconds, 1) if self.seconds else 0.0,
            "statuses": {str(s): self.statuses.count(s) for s in sorted(set(self.statuses))},
            "share_503": round(self.statuses.count(503) / num, 4) if num else 0.0,
            "num_5xx_not_503": sum(1 for s in self.statuses if s >= 500 and s != 503) + self.statuses.count(0),
            "num_incomplete_streams": self.num_incomplete,
            "per_tenant": per_tenant,
        }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def new_tenants(client: httpx.Client, admin_key: str) -> list[dict]:
    tenants, suffix = [], uuid.uuid4().hex[:8]
    for name, template, system in TENANTS:
        response = client.post("/admin/tenants", json={"name": f"load-{name}-{suffix}"},
                               headers={"Authorization": f"Bearer {admin_key}"})
        response.raise_for_status()
        tenants.append({"name": name, "template": template, "system": system,
                        "headers": {"Authorization": f"Bearer {response.json()['api_key']['key']}"}})
    return tenants


def request_body(tenant: dict, index: int, max_tokens: int) -> dict:
    body = {"model": "default", "stream": True, "stream_options": {"include_usage": True}, "max_tokens": max_tokens,
            "temperature": 0, "messages": [{"role": "system", "content": tenant["system"]},
                                           {"role": "user", "content": QUESTIONS[index % len(QUESTIONS)]}]}
    if tenant["template"]:
        body["template"] = tenant["template"]
    return body


def stream_one(client: httpx.Client, tenant: dict, index: int, max_tokens: int) -> tuple[int, float | None, bool, int]:
    """(status, TTFT, ended with usage and [DONE], completion tokens); status 0: the connection failed."""
    start, ttft, has_usage, is_done, num_tokens = time.perf_counter(), None, False, False, 0
    try:
        with client.stream("POST", "/v1/chat/completions", json=request_body(tenant, index, max_tokens),
                           headers=tenant["headers"]) as response:
            if response.status_code != 200:
                response.read()
                return response.status_code, None, False, 0
            for line in response.iter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[len("data: "):]
                if data == "[DONE]":
                    is_done = True
                    continue
                chunk = json.loads(data)
                if ttft is None and any(c.get("delta", {}).get("content") for c in chunk.get("choices", [])):
                    ttft = time.perf_counter() - start
                if chunk.get("usage"):
                    has_usage, num_tokens = True, chunk["usage"]["completion_tokens"]
    except httpx.HTTPError:
        return 0, None, False, 0
    return 200, ttft, has_usage and is_done, num_tokens


def run_round(url: str, tenants: list[dict], num_clients: int, seconds: float, max_tokens: int,
              progress: Progress | None, label: str) -> RoundResult:
    result, deadline = RoundResult(), time.monotonic() + seconds
    counter = iter(range(10**12))
    counter_lock = threading.Lock()

    def client_loop(client_index: int) -> None:
        with httpx.Client(base_url=url, timeout=300) as client:
            while time.monotonic() < deadline:
                with counter_lock:
                    index = next(counter)
                tenant = tenants[(client_index + index) % len(tenants)]
                result.add(tenant["name"], *stream_one(client, tenant, index, max_tokens))
                if progress is not None:
                    progress(label, len(result.statuses))

    started = time.perf_counter()
    threads = [threading.Thread(target=client_loop, args=(i,), daemon=True) for i in range(num_clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.seconds = time.perf_counter() - started
    return result


def idle_stats(client: httpx.Client, admin_key: str, timeout_s: float = 120.0) -> dict:
    """/admin/stats once the engine runs and waits for nothing."""
    deadline = time.monotonic() + timeout_s
    while True:
        stats = client.get("/admin/stats", headers={"Authorization": f"Bearer {admin_key}"}).json()
        engine = stats.get("engine")
        if engine is None or (engine["num_running"] == 0 and engine["num_waiting"] == 0) or time.monotonic() > deadline:
            return stats
        time.sleep(0.2)


def page_balance(engine: dict | None) -> dict | None:
    """free + evictable + pinned pages against the pool (equal when nothing runs and nothing leaked)."""
    if engine is None:
        return None
    pool, cache = engine["pool"], engine["cache"]
    page_size = pool["page_size"]
    free, evictable, pinned = pool["num_free_pages"], cache["evictable_tokens"] // page_size, cache["pinned_tokens"] // page_size
    return {"num_pages": pool["num_pages"], "free": free, "evictable": evictable, "pinned": pinned,
            "is_balanced": free + evictable + pinned == pool["num_pages"]}


def run_load_bench(url: str, admin_key: str, num_clients: int = 64, seconds: float = 60.0, max_tokens: int = 24,
                   progress: Progress | None = None) -> dict:
    with httpx.Client(base_url=url, timeout=120) as client:
        tenants = new_tenants(client, admin_key)
        rounds = []
        for number in (1, 2):
            result = run_round(url, tenants, num_clients, seconds, max_tokens, progress, f"round {number}")
            stats = idle_stats(client, admin_key)
            rounds.append({**result.summary(), "pages": page_balance(stats.get("engine")),
                           "rss_bytes": stats["process"]["rss_bytes"]})
    rss = [r["rss_bytes"] for r in rounds]
    growth = (rss[1] - rss[0]) / rss[0] if all(rss) else None
    out = {"num_clients": num_clients, "seconds": seconds, "max_tokens": max_tokens, "rounds": rounds,
           "rss_growth": None if growth is None else round(growth, 4)}
    out["violations"] = violations(out)
    return out


def violations(result: dict) -> list[str]:
    found = []
    for number, r in enumerate(result["rounds"], 1):
        if r["num_5xx_not_503"]:
            found.append(f"round {number}: {r['num_5xx_not_503']} 5xx answers (or dropped connections) other than 503")
        if r["num_incomplete_streams"]:
            found.append(f"round {number}: {r['num_incomplete_streams']} streams without usage and [DONE]")
        if r["pages"] is not None and not r["pages"]["is_balanced"]:
            found.append(f"round {number}: KV pages do not balance: {r['pages']}")
        if not r["num_requests"]:
            found.append(f"round {number}: no request finished")
    if result["rss_growth"] is not None and result["rss_growth"] >= MAX_RSS_GROWTH:
        found.append(f"RSS grew {result['rss_growth']:.1%} from round 1 to round 2 (limit {MAX_RSS_GROWTH:.0%})")
    return found
