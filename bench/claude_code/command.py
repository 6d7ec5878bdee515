"""`radixgate bench claude-code`: two one-turn Claude Code sessions through radixgate; usage and TTFT of each.

Starts `radixgate serve` on a model whose context holds Claude Code's ~20k-token prompt (default the
0.5B Qwen2.5-Coder, alias `qwen2.5-coder-0.5b`), creates a tenant, then runs two separate sessions with
`claude_agent_sdk.query` in one temporary project directory (its bundled CLI, ANTHROPIC_BASE_URL at
the server, the tenant's key, every model name mapped to the served model, no telemetry). Prints
each session's ResultMessage usage, the client's TTFT (query start to the first streamed text) and
the share of the second session's prompt read from the cache (the goal: >= 80%), plus the
server's one line per request it served.
"""

from __future__ import annotations

import os
from pathlib import Path

import typer

from bench.output import verdict, write_json

LOCAL_GGUF = Path("/work/dl/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")  # a local copy of the alias's file, when present
DEFAULT_MODEL = str(LOCAL_GGUF) if LOCAL_GGUF.exists() else "qwen2.5-coder-0.5b"  # 32k context, Q4_K_M
DEFAULT_KV_CACHE_TOKENS = 65536
DEFAULT_PROMPT = "What is 2+2? Answer with the number only; do not use any tool."
TARGET_READ_SHARE = 0.8
START_TIMEOUT_S = 1800.0  # a first GGUF load dequantizes, and the native kernels may compile, on a busy CPU


def register(app: typer.Typer) -> None:
    app.command("claude-code")(claude_code)


def claude_code(
    model: str = typer.Option(DEFAULT_MODEL, "--model", help="Model spec of the server this command starts "
                              "(an alias or a .gguf path; its context must hold ~20k tokens)."),
    url: str = typer.Option(None, "--url", help="A running gateway instead (with --admin-key, and --served-model)."),
    admin_key: str = typer.Option(None, "--admin-key", envvar="RADIXGATE_ADMIN_KEY", help="Admin key of --url's gateway."),
    served_model: str = typer.Option(None, "--served-model", help="The model name Claude Code sends (default: the "
                                     "gateway's first served model id; never Claude Code's own alias 'default')."),
    prompt: str = typer.Option(DEFAULT_PROMPT, "--prompt", help="The one user turn of each session."),
    kv_cache_tokens: int = typer.Option(DEFAULT_KV_CACHE_TOKENS, "--kv-cache-tokens",
                                        help="KV cache of the server this command starts."),
    session_timeout_s: float = typer.Option(1800.0, "--session-timeout", help="Give up on a session after this long."),
    json_out: Path = typer.Option(None, "--json", help="Write the result JSON here."),
) -> None:
    """Two Claude Code sessions in one project directory through radixgate; both must end without error and
    the second should read >= 80% of its prompt from the cache."""
    from bench.claude_code.run import run_sessions

    if url is not None:
        result = run_sessions(url, admin_key, served_model, prompt, session_timeout_s)
    else:
        from bench.server import ServerProcess

        env = {"RADIXGATE_ENGINE__MODEL": model, "RADIXGATE_ENGINE__KV_CACHE_TOKENS": str(kv_cache_tokens),
               "RADIXGATE_ENGINE__MAX_QUEUE_WAIT_S": str(session_timeout_s)}
        env.update({k: v for k, v in os.environ.items() if k.startswith("RADIXGATE_ENGINE__") and k not in env})
        typer.echo(f"starting a gateway on {model} (loading the model)...")
        server = ServerProcess(env=env)
        try:
            server.start(START_TIMEOUT_S)
            result = run_sessions(server.url, server.admin_key, served_model, prompt, session_timeout_s)
            result["server_requests"] = [line.split("gateway.requests", 1)[-1].strip()
                                         for line in server.log_tail(200_000).splitlines() if "prompt=" in line]
        finally:
            server.__exit__(None, None, None)
        result["model"] = model
    print_summary(result)
    write_json(result, json_out)


def print_summary(result: dict) -> None:
    for session in result["sessions"]:
        usage = session.get("usage") or {}
        typer.echo(f"session {session['index']}: error={session['is_error']} subtype={session['subtype']} "
                   f"ttft_s={session['ttft_s']} wall_s={session['wall_s']:.1f} result={session['result']!r}")
        typer.echo(f"  usage: input={usage.get('input_tokens')} cache_creation={usage.get('cache_creation_input_tokens')} "
                   f"cache_read={usage.get('cache_read_input_tokens')} output={usage.get('output_tokens')} "
                   f"prompt={session['prompt_tokens']} read_share={session['read_share']:.1%}")
    for line in result.get("server_requests", []):
        typer.echo(f"  server: {line}")
    second = result["sessions"][-1]
    passed = all(not s["is_error"] for s in result["sessions"]) and second["read_share"] >= TARGET_READ_SHARE
    typer.echo(f"both sessions end without error and the second reads >= {TARGET_READ_SHARE:.0%} of its prompt "
               f"from the cache: {verdict(passed)}")
