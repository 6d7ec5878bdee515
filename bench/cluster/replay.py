"""One pass of the workload through one gateway: each workload tenant's requests in order (one
thread per tenant, tenants side by side), streamed, under fresh tenants of that gateway.

Every request ends in exactly one of: completed (usage and [DONE] received), failed after its
first token (the stream's error event), or lost (failed before any token: an HTTP error or a
stream that ended without one). Nothing is dropped from the tally.
"""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from threading import Lock

import httpx

REQUEST_TIMEOUT_S = 600.0


@dataclass
class PassResult:
    label: str
    requests: int = 0
    completed: int = 0
    failed_after_first_token: int = 0
    lost: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    cached_tokens: int = 0
    wall_s: float = 0.0
    tenant_names: list[str] = field(default_factory=list)

    @property
    def hit_rate(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def create_tenant(http: httpx.Client, url: str, admin_key: str, name: str, cache_group: str | None = None) -> str:
    body = {"name": name} | ({"cache_group": cache_group} if cache_group else {})
    response = http.post(f"{url}/admin/tenants", json=body, headers={"Authorization": f"Bearer {admin_key}"})
    response.raise_for_status()
    return response.json()["api_key"]["key"]


def stream_chat(http: httpx.Client, url: str, key: str, body: dict) -> tuple[str, dict | None]:
    """("completed", usage) | ("after_first_token", None) | ("lost: why", None)."""
    body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    has_token, usage = False, None
    try:
        with http.stream("POST", f"{url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}) as r:
            if r.status_code != 200:
                return f"lost: HTTP {r.status_code} {r.read()[:200]!r}", None
            for line in r.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if "error" in event:
                    return ("after_first_token", None) if has_token else (f"lost: {event['error']}", None)
                for choice in event.get("choices") or ():
                    has_token = has_token or bool(choice["delta"].get("content"))
                usage = event.get("usage") or usage
    except httpx.HTTPError as exc:
        return ("after_first_token", None) if has_token else (f"lost: {exc!r}", None)
    return ("completed", usage) if usage else ("lost: no usage", None)


def replay(url: str, admin_key: str, rows: list[dict], label: str, *, max_tokens: int = 4,
           on_done=None) -> PassResult:
    """Send `rows` through the gateway at `url`; `on_done(num_done)` after each request."""
    result = PassResult(label)
    tag = uuid.uuid4().hex[:6]
    lock = Lock()
    with httpx.Client(timeout=REQUEST_TIMEOUT_S) as http:
        keys = {}
        for tenant in dict.fromkeys(row["tenant"] for row in rows):
            name = f"{tenant}-{label}-{tag}"
            keys[tenant] = create_tenant(http, url, admin_key, name)
            result.tenant_names.append(name)

        def run_tenant(tenant: str) -> None:
            for row in (r for r in rows if r["tenant"] == tenant):
                body = {**row["body"], "max_tokens": max_tokens, "temperature": 0}
                outcome, usage = stream_chat(http, url, keys[tenant], body)
                with lock:
                    result.requests += 1
                    if outcome == "completed":
                        result.completed += 1
                        result.prompt_tokens += usage["prompt_tokens"]
                        result.cached_tokens += (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
                    elif outcome == "after_first_token":
                        result.failed_after_first_token += 1
                    else:
                        result.lost.append(f"{row.get('id')}: {outcome}")
                    if on_done is not None:
                        on_done(result.requests)

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=len(keys)) as pool:
            list(pool.map(run_tenant, keys))
        result.wall_s = time.perf_counter() - started
    return result
