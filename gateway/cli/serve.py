"""`radixgate serve` (the API with its embedded engine, optionally the dashboard beside it) and `radixgate dashboard`.

Flags left unset fall back to RADIXGATE_* environment variables, then the
--config file, then defaults, so `radixgate serve` with no flags serves the
default model on SQLite (./radixgate.db).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import typer

log = logging.getLogger("radixgate.serve")
# litellm decides where its model cost map comes from once, while it is imported (its module-level
# `model_cost = get_model_cost_map(url)`), from this variable alone: no argument or API selects the
# bundled copy, and without it the first import fetches the map from GitHub. So the process owner
# sets it before anything imports litellm; library code never touches the environment.
LITELLM_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def register(app: typer.Typer) -> None:
    """Add the serving commands to the top-level app."""
    app.command("serve")(serve)
    app.command("dashboard")(dashboard)


def serve(
    host: str = typer.Option(None, help="Address to bind (default 127.0.0.1)."),
    port: int = typer.Option(None, help="Port for the OpenAI-compatible API (default 8000)."),
    model: str = typer.Option(None, help="Model spec: smollm2-135m, a local HF dir, a .gguf file or a cached hub id."),
    db: str = typer.Option(None, "--db", help="Database URL (default sqlite:///./radixgate.db)."),
    config: Path = typer.Option(None, "--config", exists=True, dir_okay=False, help="TOML or YAML settings file."),
    with_dashboard: bool = typer.Option(False, "--with-dashboard", help="Also start the Streamlit dashboard."),
    dashboard_port: int = typer.Option(None, "--dashboard-port", help="Dashboard port (default 8501)."),
    policy: str = typer.Option(None, help="Waiting-queue policy: fair (default: fair across tenants, longest cached "
                               "prefix first within one), lpm, dfs-weight or fcfs."),
    max_queue_wait_s: float = typer.Option(None, "--max-queue-wait-s", help="Longest a request may wait before it is "
                                           "first scheduled (default 60); past it the client gets 503 + Retry-After."),
    no_engine: bool = typer.Option(False, "--no-engine", help="Edge gateway: no embedded engine, only the remotes "
                                   "of the config (their tokenizer from remote_tokenizer or the model's files)."),
    routing: str = typer.Option(None, "--routing", help="How requests spread over remotes: affinity (default), "
                                "random, round_robin, least_load or precise (by the nodes' KV events)."),
    host_tier_tokens: int = typer.Option(None, "--host-tier-tokens", help=(
        "Host KV tier size in tokens: device-evicted prefixes are kept in shared memory and copied back on a hit "
        "(default 0: off).")),
    host_tier_bytes: int = typer.Option(None, "--host-tier-bytes", help="Host KV tier size in bytes (wins over tokens)."),
    host_tier_name: str = typer.Option(None, "--host-tier-name", help=(
        "Shared-memory name of the host tier: gateways on this machine given the same name share its hits.")),
    speculative_tokens: int = typer.Option(None, "--speculative-tokens", min=0, help=(
        "Drafts per greedy decode step, looked up from the request's own prompt and output and verified in the "
        "same forward; the output does not change (default 7; 0: off).")),
    redis_url: str = typer.Option(None, "--redis-url", help=(
        "Redis shared by edge replicas (redis://host:6379/0): tenants' per-minute limits and concurrency slots "
        "hold across all of them (default: each process alone; RADIXGATE_REDIS_URL).")),
) -> None:
    """Serve the gateway with the embedded engine (or, with --no-engine, as an edge in front of remotes):
    migrate the database, load the model, then run uvicorn."""
    use_local_litellm_cost_map()
    engine = {"policy": policy, "max_queue_wait_s": max_queue_wait_s, "host_tier_tokens": host_tier_tokens,
              "host_tier_bytes": host_tier_bytes, "host_tier_name": host_tier_name,
              "speculative_tokens": speculative_tokens}
    settings = load_settings(host=host, port=port, db_url=db, config_file=config, dashboard_port=dashboard_port,
                             model=model, engine=engine, no_engine=no_engine, routing=routing, redis_url=redis_url)
    configure_logging(settings.log_level)
    import uvicorn

    from gateway.db.migrate import upgrade
    from gateway.main import create_app, safe_url
    from gateway.services import load_engine

    log.info("migrating %s", safe_url(settings.db_url))
    upgrade(settings.db_url)
    # The dashboard's Engine page reads live cache gauges from this gateway's /metrics (RADIXGATE_GATEWAY_URL).
    dashboard_process = (
        start_dashboard(settings.db_url, settings.dashboard_port, settings.host, gateway_url(settings))
        if with_dashboard else None
    )
    log_urls(settings, with_dashboard)
    try:
        try:
            engine = load_engine(settings)
        except (OSError, ValueError) as exc:  # a missing model path, an unknown spec or dtype
            typer.echo(f"error: cannot load model {settings.engine.model!r}: {exc}", err=True)
            raise typer.Exit(2) from exc
        # SIGTERM: uvicorn stops accepting, lets open responses (streams) finish for up to
        # shutdown_timeout_s, then cancels the rest; the engine keeps stepping until it is done.
        server = uvicorn.Server(uvicorn.Config(create_app(settings, engine=engine), host=settings.host,
                                               port=settings.port, log_level=settings.log_level.lower(),
                                               timeout_graceful_shutdown=settings.shutdown_timeout_s))
        if engine is None:
            server.run()
        else:
            run_engine_on_main_thread(server, engine)
    finally:
        if dashboard_process is not None:
            stop_process(dashboard_process)


def use_local_litellm_cost_map() -> None:
    """LITELLM_ENV's defaults into this process's environment (a value already set wins)."""
    for name, value in LITELLM_ENV.items():
        os.environ.setdefault(name, value)


def run_engine_on_main_thread(server, engine) -> None:
    """uvicorn on a side thread, the engine's step loop on this one (see engine.Engine.run_here: libgomp
    cuts its spin-waiting short when a thread other than the main one drives torch's OpenMP threads).
    Ctrl-C or SIGTERM stops the server; its lifespan drains the log writer; then the engine stops."""
    server_done = threading.Event()

    def run_server() -> None:
        try:
            server.run()
        finally:
            server_done.set()

    def stop(signum, frame) -> None:
        if server.should_exit:  # a second Ctrl-C: stop waiting
            raise KeyboardInterrupt
        log.info("%s: stopping the server", signal.Signals(signum).name)
        server.should_exit = True

    thread = threading.Thread(target=run_server, name="radixgate-http")
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    thread.start()
    try:
        engine.run_here(until=server_done)  # on return or Ctrl-C the loop has stopped and aborted what was left
    finally:
        server.should_exit = True
        thread.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def dashboard(
    db: str = typer.Option(None, "--db", help="Database URL (default: RADIXGATE_DB_URL or sqlite:///./radixgate.db)."),
    port: int = typer.Option(None, "--port", help="Dashboard port (default 8501)."),
    host: str = typer.Option(None, "--host", help="Address to bind (default 127.0.0.1)."),
    gateway: str = typer.Option(None, "--gateway", help="Gateway base URL for live engine metrics, e.g. http://127.0.0.1:8000."),
) -> None:
    """Run the Streamlit dashboard over the gateway's database (in the foreground)."""
    settings = load_settings(db_url=db, dashboard_port=port, host=host)
    configure_logging(settings.log_level)
    process = start_dashboard(settings.db_url, settings.dashboard_port, settings.host, gateway)
    typer.echo(f"dashboard: http://{settings.host}:{settings.dashboard_port}")
    try:
        raise typer.Exit(process.wait())
    except KeyboardInterrupt:
        stop_process(process)


def load_settings(*, model: str | None = None, engine: dict[str, Any] | None = None, no_engine: bool = False,
                  routing: str | None = None, **overrides: Any):
    """Settings with only the flags the user gave overriding env / config file / defaults (`engine`: engine flags)."""
    from gateway.settings import Settings

    values = {k: v for k, v in overrides.items() if v is not None}
    engine_values = {k: v for k, v in (engine or {}).items() if v is not None}
    if model is not None:
        engine_values["model"] = model
    if no_engine:
        engine_values["enabled"] = False
    if engine_values:
        values["engine"] = engine_values
    if routing is not None:
        values["routing"] = {"mode": routing}
    return Settings(**values)


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)


# The product shows no Streamlit developer chrome: "viewer" mode drops the Deploy button and the developer menu.
DASHBOARD_CHROME_FLAGS = ("--client.toolbarMode", "viewer")


def dashboard_command(port: int, host: str = "127.0.0.1") -> list[str]:
    import dashboard as dashboard_pkg

    app_path = Path(dashboard_pkg.__file__).resolve().parent / "app.py"
    return [
        sys.executable, "-m", "streamlit", "run", str(app_path),
        "--server.port", str(port), "--server.address", host,
        "--server.headless", "true", "--browser.gatherUsageStats", "false",
        *DASHBOARD_CHROME_FLAGS,
    ]


def start_dashboard(
    db_url: str, port: int, host: str = "127.0.0.1", gateway_url: str | None = None
) -> subprocess.Popen:
    """Start `streamlit run dashboard/app.py` on `port`, reading the same database (RADIXGATE_DB_URL)
    and, when given, the gateway's live /metrics (RADIXGATE_GATEWAY_URL)."""
    env = {**os.environ, "RADIXGATE_DB_URL": db_url}
    if gateway_url:
        env["RADIXGATE_GATEWAY_URL"] = gateway_url
    log.info("starting dashboard on port %d", port)
    return subprocess.Popen(dashboard_command(port, host), env=env)


def stop_process(process: subprocess.Popen, timeout_s: float = 10.0) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def gateway_url(settings) -> str:
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    return f"http://{host}:{settings.port}"


def log_urls(settings, with_dashboard: bool) -> None:
    base = gateway_url(settings)
    log.info("OpenAI-compatible API: %s/v1  (POST %s/v1/chat/completions)", base, base)
    log.info("API docs: %s/docs   metrics: %s/metrics", base, base)
    if with_dashboard:
        log.info("dashboard: http://%s:%d", settings.host, settings.dashboard_port)
