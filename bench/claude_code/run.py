"""Two Claude Code sessions against a gateway, through the Claude Agent SDK's bundled CLI.

Each session is a fresh `claude_agent_sdk.query` (a new CLI process, a new session id) in the same
temporary project directory, one turn, with partial messages on so the first streamed text can be
timed. The CLI's environment points it at the gateway: ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY (a
fresh tenant's key), ANTHROPIC_MODEL and ANTHROPIC_DEFAULT_{OPUS,SONNET,HAIKU}_MODEL (the served
model), CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1, DISABLE_TELEMETRY=1, and a long API timeout
(a CPU prefill of ~20k tokens takes minutes).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from pathlib import Path

import httpx

MODEL_VARIABLES = ("ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL",
                   "ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_SMALL_FAST_MODEL")


def create_tenant(url: str, admin_key: str) -> str:
    response = httpx.post(f"{url}/admin/tenants", json={"name": f"claude-code-{uuid.uuid4().hex[:8]}"},
                          headers={"Authorization": f"Bearer {admin_key}"}, timeout=60)
    response.raise_for_status()
    return response.json()["api_key"]["key"]


def cli_environment(url: str, key: str, model: str, timeout_s: float) -> dict[str, str]:
    env = {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": key, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "API_TIMEOUT_MS": str(int(timeout_s * 1000))}
    return {**env, **{name: model for name in MODEL_VARIABLES}}


async def one_session(index: int, project: Path, env: dict[str, str], model: str, prompt: str) -> dict:
    from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, StreamEvent, query

    options = ClaudeAgentOptions(cwd=str(project), env=env, model=model, max_turns=1, include_partial_messages=True)
    started, ttft_s, result, failure = time.perf_counter(), None, None, None
    try:
        async for item in query(prompt=prompt, options=options):
            if isinstance(item, StreamEvent) and ttft_s is None and item.event.get("type") == "content_block_delta":
                ttft_s = round(time.perf_counter() - started, 2)
            if isinstance(item, ResultMessage):
                result = item
    except Exception as exc:  # the CLI ended with an error result (an API error it did not retry): report it
        failure = f"{type(exc).__name__}: {exc}"
    wall_s = time.perf_counter() - started
    if result is None:
        return {"index": index, "is_error": True, "subtype": "no_result", "ttft_s": ttft_s, "wall_s": wall_s,
                "result": failure, "usage": None, "prompt_tokens": 0, "read_share": 0.0}
    usage = result.usage or {}
    prompt_tokens = sum(usage.get(key) or 0 for key in
                        ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    read = usage.get("cache_read_input_tokens") or 0
    return {"index": index, "is_error": result.is_error, "subtype": result.subtype, "ttft_s": ttft_s, "wall_s": wall_s,
            "result": (result.result or "")[:200], "usage": usage, "prompt_tokens": prompt_tokens,
            "read_share": read / prompt_tokens if prompt_tokens else 0.0, "num_turns": result.num_turns,
            "errors": result.errors}


def served_model(url: str, key: str) -> str:
    response = httpx.get(f"{url}/v1/models", headers={"x-api-key": key, "anthropic-version": "2023-06-01"}, timeout=60)
    response.raise_for_status()
    return response.json()["data"][0]["id"]


def run_sessions(url: str, admin_key: str, model: str | None, prompt: str, timeout_s: float) -> dict:
    """Both sessions, one after the other, in one fresh project directory; returns their figures."""
    key = create_tenant(url, admin_key)
    model = model or served_model(url, key)
    env = cli_environment(url, key, model, timeout_s)
    sessions = []
    with tempfile.TemporaryDirectory(prefix="radixgate-claude-code-") as project:
        for index in (1, 2):
            sessions.append(asyncio.run(asyncio.wait_for(one_session(index, Path(project), env, model, prompt), timeout_s)))
    return {"sessions": sessions, "prompt": prompt, "served_model": model}
