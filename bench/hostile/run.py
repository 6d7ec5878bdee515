"""The hostile-input bench: each probe's status and latency, and a victim tenant's TTFT alone and during it.

For each probe an attacker tenant sends it again and again (one at a time) while a
victim tenant streams `repeat` short chat completions; the victim's TTFT (time to its
first content chunk) is measured the same way with no attacker first.
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from dataclasses import dataclass, field

import httpx

SYSTEM = "You are a terse assistant. Answer in a few words."


def chat(template: str | None = None, **fields) -> dict:
    body = {"model": "default", "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Say hi."}],
            "max_tokens": 4, "temperature": 0, **fields}
    return {**body, "template": template} if template else body


PROBES = {
    "power 3**(3**15)": ("/v1/chat/completions", chat("{% block question %}{{ 3 ** (3 ** 15) }}{% endblock %}")),
    "repeat 'x'*2e8": ("/v1/chat/completions", chat('{% block question %}{{ "x" * 200000000 }}{% endblock %}')),
    "nested range loops": ("/v1/chat/completions", chat(
        "{% block question %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{% endblock %}")),
    "recursive macro": ("/v1/chat/completions", chat(
        "{% block question %}{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}{% endblock %}")),
    "doubling ~ in a loop": ("/v1/chat/completions", chat(
        '{% block question %}{% set ns = namespace(s="x") %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}'
        "{% endfor %}{{ ns.s }}{% endblock %}")),
    "200 MB template body": ("/v1/chat/completions", None),
    "400 KB stop strings": ("/v1/chat/completions", chat(stop=["x" * 100_000] * 4)),
    "seed 2**70": ("/v1/chat/completions", chat(seed=2**70)),
}
BIG_BODY = b'{"model": "default", "template": "' + b"x" * 200_000_000 + b'", "messages": []}'


@dataclass
class ProbeResult:
    name: str
    statuses: list[int] = field(default_factory=list)
    latencies_s: list[float] = field(default_factory=list)
    victim_ttft_s: list[float] = field(default_factory=list)

    def summary(self) -> dict:
        return {
            "probe": self.name, "statuses": sorted(set(self.statuses)), "num_sent": len(self.statuses),
            "latency_p50_s": round(statistics.median(self.latencies_s), 3),
            "latency_max_s": round(max(self.latencies_s), 3),
            "victim_ttft_p50_s": round(statistics.median(self.victim_ttft_s), 3),
        }


def new_tenant(client: httpx.Client, admin_key: str) -> dict:
    response = client.post("/admin/tenants", json={"name": f"hostile-{uuid.uuid4().hex[:10]}"},
                           headers={"Authorization": f"Bearer {admin_key}"})
    response.raise_for_status()
    return {"Authorization": f"Bearer {response.json()['api_key']['key']}"}


def victim_ttft(client: httpx.Client, headers: dict, index: int) -> float:
    body = chat(stream=True, messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"Say hi {index}."}])
    start = time.perf_counter()
    with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as response:
        response.raise_for_status()
        ttft = None
        for line in response.iter_lines():  # read to the end: the next request starts on an idle server
            if ttft is None and '"content"' in line:
                ttft = time.perf_counter() - start
    if ttft is None:
        raise RuntimeError("the victim's stream had no content")
    return ttft


def send_probe(client: httpx.Client, path: str, body: dict | None, headers: dict) -> tuple[int, float]:
    """(status, seconds); status 0 when the server closed the connection before answering."""
    start = time.perf_counter()
    try:
        if body is None:
            response = client.post(path, content=BIG_BODY, headers={**headers, "content-type": "application/json"})
        else:
            response = client.post(path, json=body, headers=headers)
    except httpx.TransportError:
        return 0, time.perf_counter() - start
    return response.status_code, time.perf_counter() - start


def run_probe(url: str, name: str, attacker: dict, victim: dict, repeat: int) -> ProbeResult:
    path, body = PROBES[name]
    result, stop = ProbeResult(name), threading.Event()

    def attack() -> None:
        with httpx.Client(base_url=url, timeout=120) as client:
            while not stop.is_set():
                status, latency = send_probe(client, path, body, attacker)
                result.statuses.append(status)
                result.latencies_s.append(latency)

    thread = threading.Thread(target=attack)
    thread.start()
    try:
        with httpx.Client(base_url=url, timeout=120) as client:
            result.victim_ttft_s = [victim_ttft(client, victim, i) for i in range(repeat)]
    finally:
        stop.set()
        thread.join()
    return result


def run_hostile_bench(url: str, admin_key: str, repeat: int = 5) -> dict:
    with httpx.Client(base_url=url, timeout=120) as client:
        attacker, victim = new_tenant(client, admin_key), new_tenant(client, admin_key)
        victim_ttft(client, victim, -1)  # warm the victim's system prefix, as during the probes
        alone = [victim_ttft(client, victim, i) for i in range(repeat)]
    probes = [run_probe(url, name, attacker, victim, repeat).summary() for name in PROBES]
    return {"victim_ttft_alone_p50_s": round(statistics.median(alone), 3), "repeat": repeat, "probes": probes,
            "num_5xx": sum(any(s >= 500 for s in p["statuses"]) for p in probes)}
