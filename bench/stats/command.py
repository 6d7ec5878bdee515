"""`radixgate bench stats`: seed N request-log rows (default 1M) into SQLite and PostgreSQL and
time the stats queries that GET /v1/stats and GET /admin/stats run, the dashboard's overview and
doctor pages' queries, and `radixgate doctor` itself."""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer

from bench.output import write_json

DEFAULT_PG_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def register(app: typer.Typer) -> None:
    app.command("stats")(stats)


def stats(
    rows: int = typer.Option(1_000_000, help="Request-log rows to seed."),
    tenants: int = typer.Option(20, help="Tenants (Zipf-skewed: the busiest holds ~28% of rows)."),
    days: int = typer.Option(30, help="Days the rows span, ending now."),
    sqlite_path: Path = typer.Option(None, "--sqlite", help="SQLite file to create (default: a temp file, removed after)."),
    pg_server: str = typer.Option(DEFAULT_PG_SERVER, "--pg", help="PostgreSQL server URL; a scratch database is created and dropped."),
    no_pg: bool = typer.Option(False, "--no-pg", help="Skip PostgreSQL."),
    repeats: int = typer.Option(3, help="Runs per query (first and median reported)."),
    json_out: Path = typer.Option(None, "--json", help="Also write the results here."),
) -> None:
    """Seed the request log and time the stats queries on SQLite and PostgreSQL."""
    from bench.stats.run import create_scratch_database, drop_scratch_database, run_backend

    results: dict = {"rows": rows, "tenants": tenants, "days": days}
    with tempfile.TemporaryDirectory(prefix="radixgate-bench-stats-") as scratch:
        path = sqlite_path or Path(scratch) / "bench.db"
        if path.exists():
            raise typer.BadParameter(f"{path} exists; the bench seeds an empty database", param_hint="--sqlite")
        typer.echo(f"seeding {rows:,} rows into SQLite at {path} ...")
        results["sqlite"] = run_backend(f"sqlite:///{path}", rows, tenants, days, repeats)
        print_backend("sqlite", results["sqlite"])
    if not no_pg:
        url = create_scratch_database(pg_server)
        try:
            typer.echo(f"seeding {rows:,} rows into PostgreSQL ...")
            results["postgresql"] = run_backend(url, rows, tenants, days, repeats)
            print_backend("postgresql", results["postgresql"])
        finally:
            drop_scratch_database(pg_server, url)
    write_json(results, json_out)


def print_backend(name: str, result: dict) -> None:
    """Wall times, plus this process's CPU time (all of the work on SQLite, none of the server's on PostgreSQL)."""
    typer.echo(f"{name}: seeded in {result['seed_s']:.1f} s (bulk insert + index build)")
    for query, timing in result["queries"].items():
        typer.echo(f"  {query:34s} first {timing['first_s']:.3f} s   median {timing['median_s']:.3f} s"
                   f"   client cpu {timing['cpu_median_s']:.3f} s")
    cli = result["doctor_cli"]
    typer.echo(f"  {'radixgate doctor --json (process)':34s} first {cli['first_s']:.3f} s   median {cli['median_s']:.3f} s"
               f"   process cpu {cli['cpu_median_s']:.3f} s")
