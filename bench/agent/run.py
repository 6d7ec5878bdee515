"""`bench agent`: replay an agent/RAG workload through a running gateway, raw order vs canonicalized.

The workload runs twice, `canonicalize: false` then `true`, each time under tenants created fresh
(so neither run can hit what the other cached). Hit rates are token-weighted from the
`usage.prompt_tokens_details.cached_tokens` the API reported: sum(cached) / sum(prompt).
The shadow (raw-order) hit rate comes from /v1/stats of the canonical run's tenants.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx

REQUEST_TIMEOUT_S = 600.0
STATS_SETTLE_S = 2.0
PROGRESS_EVERY = 25


@dataclass
class Tally:
    """Token counts of a set of requests."""

    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0

    def add(self, prompt_tokens: int, cached_tokens: int) -> None:
        self.requests += 1
        self.prompt_tokens += prompt_tokens
        self.cached_tokens += cached_tokens

    @property
    def hit_rate(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def as_dict(self) -> dict:
        return {**self.__dict__, "hit_rate": round(self.hit_rate, 4)}


@dataclass
class RunResult:
    """One pass over the workload."""

    is_canonical: bool
    wall_s: float = 0.0
    total: Tally = field(default_factory=Tally)
    by_tenant: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    by_style: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    errors: list[str] = field(default_factory=list)
    tenant_keys: dict[str, str] = field(default_factory=dict)
    tenant_names: dict[str, str] = field(default_factory=dict)  # workload tenant -> the gateway tenant's name


class GatewayClient:
    """The few gateway calls the benchmark makes (admin: tenants; tenant: chat, stats)."""

    def __init__(self, url: str, admin_key: str | None) -> None:
        self.url = url.rstrip("/")
        self.admin_key = admin_key
        self.http = httpx.Client(timeout=REQUEST_TIMEOUT_S)

    def create_tenant(self, name: str) -> str:
        """Create tenant `name` and return its API key."""
        if not self.admin_key:
            raise RuntimeError("creating tenants needs the admin key (--admin-key or RADIXGATE_ADMIN_KEY)")
        response = self.http.post(
            f"{self.url}/admin/tenants", json={"name": name}, headers={"Authorization": f"Bearer {self.admin_key}"}
        )
        response.raise_for_status()
        return response.json()["api_key"]["key"]

    def chat(self, key: str, body: dict) -> dict:
        response = self.http.post(f"{self.url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"})
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}: {response.text[:300]}")
        return response.json()

    def stats(self, key: str) -> dict:
        response = self.http.get(f"{self.url}/v1/stats", headers={"Authorization": f"Bearer {key}"})
        response.raise_for_status()
        return response.json()

    def close(self) -> None:
        self.http.close()


def replay(
    client: GatewayClient, rows: list[dict], *, is_canonical: bool, concurrency: int = 1, progress=None
) -> RunResult:
    """Send every row's body (in order) under fresh tenants; tally the usage the API reported.

    `progress(result)` (optional) is called after every PROGRESS_EVERY requests.
    """
    tag = f"{'canon' if is_canonical else 'raw'}-{uuid.uuid4().hex[:6]}"
    result = RunResult(is_canonical=is_canonical)
    for tenant in dict.fromkeys(row["tenant"] for row in rows):
        result.tenant_names[tenant] = f"{tenant}-{tag}"
        result.tenant_keys[tenant] = client.create_tenant(result.tenant_names[tenant])

    def send(row: dict) -> tuple[dict, dict | None, str | None]:
        body = {**row["body"], "canonicalize": is_canonical}
        try:
            return row, client.chat(result.tenant_keys[row["tenant"]], body), None
        except Exception as exc:  # counted and reported, never silently dropped
            return row, None, f"{row.get('id')}: {exc}"

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for row, response, error in pool.map(send, rows):
            if error is not None:
                result.errors.append(error)
                continue
            usage = response["usage"]
            prompt, cached = usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"]
            for tally in (result.total, result.by_tenant[row["tenant"]], result.by_style[row.get("style", "?")]):
                tally.add(prompt, cached)
            if progress is not None and result.total.requests % PROGRESS_EVERY == 0:
                progress(result)
    result.wall_s = time.perf_counter() - started
    return result


def shadow_hit_rate(client: GatewayClient, tenant_keys: dict[str, str]) -> float | None:
    """Token-weighted raw-order (shadow index) hit rate of these tenants, from /v1/stats."""
    time.sleep(STATS_SETTLE_S)  # the request log is written in batches, off the hot path
    num_prompt, num_shadow = 0, 0.0
    for key in tenant_keys.values():
        stats = client.stats(key)
        if stats.get("raw_hit_rate") is None:
            continue
        num_prompt += stats["prompt_tokens"]
        num_shadow += stats["raw_hit_rate"] * stats["prompt_tokens"]
    return num_shadow / num_prompt if num_prompt else None


def warm_up(client: GatewayClient, rows: list[dict]) -> None:
    """One request under a throwaway tenant, so neither timed run pays first-request costs."""
    key = client.create_tenant(f"warmup-{uuid.uuid4().hex[:6]}")
    client.chat(key, {**rows[0]["body"], "max_tokens": 2})


def summarize(raw: RunResult, canonical: RunResult, shadow: float | None) -> dict:
    """The benchmark's JSON: the issue's keys first, then ratios and breakdowns."""
    ratio = canonical.total.hit_rate / raw.total.hit_rate if raw.total.hit_rate else None
    return {
        "requests": canonical.total.requests,
        "hit_rate_raw": round(raw.total.hit_rate, 4),
        "hit_rate_canonical": round(canonical.total.hit_rate, 4),
        "prompt_tokens": canonical.total.prompt_tokens,
        "wall_s_raw": round(raw.wall_s, 2),
        "wall_s_canonical": round(canonical.wall_s, 2),
        "hit_rate_ratio": round(ratio, 3) if ratio else None,
        "wall_speedup": round(raw.wall_s / canonical.wall_s, 3) if canonical.wall_s else None,
        "shadow_hit_rate_raw_order": round(shadow, 4) if shadow is not None else None,
        "prompt_tokens_raw": raw.total.prompt_tokens,
        "cached_tokens_raw": raw.total.cached_tokens,
        "cached_tokens_canonical": canonical.total.cached_tokens,
        "errors": raw.errors + canonical.errors,
        "by_tenant": {t: {"raw": raw.by_tenant[t].as_dict(), "canonical": c.as_dict()} for t, c in canonical.by_tenant.items()},
        "by_style": {s: {"raw": raw.by_style[s].as_dict(), "canonical": c.as_dict()} for s, c in canonical.by_style.items()},
    }


def run_agent_bench(
    url: str, admin_key: str | None, rows: list[dict], *, concurrency: int = 1, progress=None
) -> dict:
    """Both passes against the gateway at `url`; returns the summary dict."""
    client = GatewayClient(url, admin_key)
    try:
        warm_up(client, rows)
        raw = replay(client, rows, is_canonical=False, concurrency=concurrency, progress=progress)
        canonical = replay(client, rows, is_canonical=True, concurrency=concurrency, progress=progress)
        shadow = shadow_hit_rate(client, canonical.tenant_keys)
    finally:
        client.close()
    return summarize(raw, canonical, shadow)
