"""`radixgate doctor --tenant NAME`: why a tenant's prompts miss the prefix cache, and what to fix first."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import typer


def register(app: typer.Typer) -> None:
    """Add `doctor` to the top-level app."""
    app.command("doctor")(doctor)


def doctor(
    tenant: str = typer.Option(..., "--tenant", help="Tenant name."),
    db: str = typer.Option(None, "--db", help="Database URL (default: RADIXGATE_DB_URL or sqlite:///./radixgate.db)."),
    hours: float = typer.Option(None, "--hours", min=0, help="Only the last N hours (default: the whole log)."),
    as_json: bool = typer.Option(False, "--json", help="Print the diagnosis as JSON."),
) -> None:
    """Diagnose a tenant's request log: ranked causes of lost prefix hits, fixes and the speedup at stake."""
    from gateway.db.insight_queries import find_tenant
    from gateway.doctor.diagnosis import diagnose
    from gateway.db.session import make_engine, make_session_factory

    url = db or default_db_url()
    require_database_file(url)
    since = datetime.now(timezone.utc) - timedelta(hours=hours) if hours else None
    engine = make_engine(url)
    try:
        with make_session_factory(engine)() as session:  # read-only: never committed
            row = find_tenant(session, tenant)
            if row is None:
                raise typer.BadParameter(f"no tenant named {tenant!r} in {url}", param_hint="--tenant")
            diagnosis = diagnose(session, row.id, since=since)
    finally:
        engine.dispose()
    if as_json:
        typer.echo(json.dumps(diagnosis.to_dict(), indent=2, default=str))
    else:
        print_report(diagnosis)


def default_db_url() -> str:
    """The configured database URL. Imported only when --db is not given: the settings (pydantic)
    are a good part of this command's start-up, which is most of its time on a small log."""
    from gateway.settings import Settings

    return Settings().db_url


def require_database_file(url: str) -> None:
    """Refuse a SQLite path that does not exist (opening it would create an empty database)."""
    from pathlib import Path

    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        if not Path(parsed.database).is_file():
            raise typer.BadParameter(f"no database file at {parsed.database}", param_hint="--db")


def print_report(diagnosis) -> None:
    """The diagnosis as a rich report: headline rates, the fix that matters most, then every cause."""
    from rich.console import Console
    from rich.panel import Panel
    from rich.table import Table

    console = Console()
    console.print(
        f"[bold]{diagnosis.tenant_name}[/]: {diagnosis.num_requests:,} requests, "
        f"{diagnosis.prompt_tokens:,} prompt tokens. Hit rate [bold]{diagnosis.hit_rate:.1%}[/], "
        f"canonical (attainable) {diagnosis.canonical_hit_rate:.1%}, raw order {diagnosis.raw_hit_rate:.1%}; "
        f"{diagnosis.lost_tokens:,} reusable prefix tokens lost."
    )
    recovered = diagnosis.cached_tokens - diagnosis.raw_cached_tokens
    if recovered > 0:
        console.print(f"Canonicalization already recovers {recovered:,} tokens the clients' raw order would miss.")
    if not diagnosis.causes:
        console.print("[green]No lost prefix hits: nothing to fix.[/]")
        return
    top, speedup = diagnosis.causes[0], diagnosis.speedup
    text = f"{top.fix}\n\nIf fixed ({top.counterfactual}): {speedup_line(speedup)}"
    if diagnosis.canonicalize_speedup is not None:
        text += f"\nIf canonicalized (every ordering cause): {speedup_line(diagnosis.canonicalize_speedup)}"
    text += f"\nModels: {speedup.model}; {speedup.ttft_model}."
    console.print(Panel(text, title=f"Fix first: {top.title}", border_style="yellow"))
    table = Table(title="Causes of lost prefix hits, ranked")
    for column in ("#", "cause", "share", "lost tokens", "requests", "speedup if fixed"):
        table.add_column(column, justify="left" if column == "cause" else "right")
    for rank, cause in enumerate(diagnosis.causes, start=1):
        factor = "unbounded" if cause.speedup is None else f"{cause.speedup:.2f}x"
        table.add_row(str(rank), cause.title, f"{cause.share:.0%}", f"{cause.lost_tokens:,}", f"{cause.num_requests:,}", factor)
    console.print(table)
    for rank, cause in enumerate(diagnosis.causes, start=1):
        console.print(f"[bold]{rank}. {cause.title}[/]\n   evidence: {cause.detail}\n   fix: {cause.fix}")


def speedup_line(speedup) -> str:
    factor = "unbounded" if speedup.speedup is None else f"{speedup.speedup:.2f}x"
    ttft = "" if speedup.ttft_speedup is None else f", {speedup.ttft_speedup:.2f}x in the tenant's own TTFTs"
    return (f"[bold]{factor}[/] prefill speedup{ttft} (uncached tokens {speedup.uncached_tokens_before:,} -> "
            f"{speedup.uncached_tokens_after:,}; hit rate -> {speedup.hit_rate_after:.1%})")
