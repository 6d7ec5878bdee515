"""Peers driven the same way over HTTP: a vLLM CPU server and `radixgate serve`, through the OpenAI chat API.

Both servers get the same chat bodies, streamed (``stream_options.include_usage``), so each pays
HTTP, tokenization and scheduling; TTFT is the time to the first streamed content, prefill tokens
computed are ``prompt_tokens - cached_tokens`` from the usage each server reports. vLLM runs from its
own virtual environment (``--vllm-python``, e.g. /tmp/vllm-venv/bin/python) on the HF directory
radixgate caches for the model, with prefix caching on and OMP_NUM_THREADS set to the bench's
threads; or an already running server is given by URL.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.server import free_port
from gateway.cli.serve import stop_process

REQUEST_TIMEOUT_S = 900.0
VLLM_START_TIMEOUT_S = 900.0


@dataclass
class Reply:
    text: str
    ttft_s: float
    prompt_tokens: int
    cached_tokens: int


@dataclass
class HttpRun:
    name: str
    wall_s: float
    replies: list[Reply] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        ttfts = sorted(r.ttft_s for r in self.replies) or [float("nan")]
        return {"name": self.name, "wall_s": self.wall_s, "ttft_ms_p50": 1000 * statistics.median(ttfts),
                "ttft_ms_p95": 1000 * ttfts[min(len(ttfts) - 1, int(0.95 * len(ttfts)))],
                "prefill_tokens": sum(r.prompt_tokens - r.cached_tokens for r in self.replies),
                "prompt_tokens": sum(r.prompt_tokens for r in self.replies), "errors": self.errors[:5],
                "num_errors": len(self.errors)}


def stream_chat(client: httpx.Client, url: str, headers: dict, body: dict) -> Reply:
    """One streamed chat completion; raises RuntimeError on an HTTP error."""
    body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    started, first, parts, usage = time.perf_counter(), None, [], {}
    with client.stream("POST", f"{url}/v1/chat/completions", json=body, headers=headers) as response:
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}: {response.read()[:300]!r}")
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta", {}).get("content")
                if delta:
                    first = first or time.perf_counter()
                    parts.append(delta)
            usage = chunk.get("usage") or usage
    details = usage.get("prompt_tokens_details") or {}
    return Reply("".join(parts), (first or time.perf_counter()) - started, int(usage.get("prompt_tokens", 0)),
                 int(details.get("cached_tokens") or 0))


def replay_chat(name: str, url: str, headers: dict | list[dict], bodies: list[dict], *, concurrency: int,
                progress=None) -> HttpRun:
    """Send ``bodies`` (in order, ``concurrency`` in flight; all of them at once for a cold group), each with
    ``headers`` (or its own entry of a list of them)."""
    per_body = headers if isinstance(headers, list) else [headers] * len(bodies)
    run = HttpRun(name, 0.0)
    done = [0]

    def send(pair: tuple[dict, dict]):
        try:
            reply = stream_chat(client, url, *pair)
        except Exception as exc:  # counted and reported, never dropped
            reply = exc
        done[0] += 1
        if progress:
            progress(name, done[0])
        return reply

    with httpx.Client(timeout=REQUEST_TIMEOUT_S, limits=httpx.Limits(max_connections=max(8, concurrency))) as client:
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            for reply in pool.map(send, zip(per_body, bodies)):
                if isinstance(reply, Exception):
                    run.errors.append(str(reply))
                    run.replies.append(Reply("", float("nan"), 0, 0))
                else:
                    run.replies.append(reply)
        run.wall_s = time.perf_counter() - started
    return run


class VllmServer:
    """vLLM's OpenAI server (CPU build) in a child process on a free loopback port; a context manager.

    `cpu_bind`: the cores its threads are pinned to (VLLM_CPU_OMP_THREADS_BIND, e.g. "0" or "0-1"),
    so servers side by side get cores of their own; default "auto" (vLLM 0.32 takes "auto", "nobind"
    or a core list; "all" fails its engine start)."""

    def __init__(self, python: str, model_dir: Path, served_name: str, *, dtype: str, num_threads: int,
                 kv_cache_gb: int = 2, max_model_len: int = 4096, cpu_bind: str | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = tempfile.NamedTemporaryFile(prefix="vllm-", suffix=".log", delete=False)
        self.log_path = Path(self._log.name)
        self.command = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
                        "--served-model-name", served_name, "--host", "127.0.0.1", "--port", str(self.port),
                        "--max-model-len", str(max_model_len), "--dtype", dtype, "--enable-prefix-caching",
                        "--enable-prompt-tokens-details"]
        self.env = {**os.environ, "OMP_NUM_THREADS": str(num_threads), "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gb),
                    "VLLM_CPU_OMP_THREADS_BIND": cpu_bind or "auto"}
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> "VllmServer":
        self._process = subprocess.Popen(self.command, env=self.env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + VLLM_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"vLLM exited with {self._process.returncode}: {self.log_path.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(1.0)
        self.__exit__()
        raise TimeoutError(f"vLLM did not answer /health in {VLLM_START_TIMEOUT_S:.0f} s (log {self.log_path})")

    def __exit__(self, *exc_info) -> None:
        if self._process is not None:
            stop_process(self._process, timeout_s=30)
        self._process = None


def peer_dtype(dtype: str) -> str:
    """The dtype both servers run: ``dtype`` itself, or what the engine's "auto" picks on this machine's CPU.
    Named explicitly to both, so they compute in the same dtype (vLLM has no measured choice of its own,
    and bfloat16 on a CPU without native bfloat16 is emulated)."""
    if dtype != "auto":
        return dtype
    import torch

    from engine.runner import resolve_dtype

    return str(resolve_dtype("auto", torch.device("cpu"))).removeprefix("torch.")


def agreement(a: HttpRun, b: HttpRun) -> float:
    """Share of requests whose answers are the same text in both runs."""
    pairs = list(zip(a.replies, b.replies))
    return sum(x.text == y.text for x, y in pairs) / max(1, len(pairs))


def print_peers(title: str, result: dict) -> None:
    """The side-by-side table of a peers result ({"peers": [summary...], "answer_agreement", ...})."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for column in ("server", "wall s", "TTFT p50 ms", "TTFT p95 ms", "prefill tokens", "errors"):
        table.add_column(column, justify="right")
    for peer in result["peers"]:
        table.add_row(peer["name"], f"{peer['wall_s']:.2f}", f"{peer['ttft_ms_p50']:.0f}", f"{peer['ttft_ms_p95']:.0f}",
                      str(peer["prefill_tokens"]), str(peer["num_errors"]))
    console = Console()
    console.print(table)
    console.print(f"radixgate wall = {result['wall_ratio_vs_vllm']:.2f}x vLLM's; same answer text on "
                  f"{result['answer_agreement']:.0%} of requests")
