"""`radixgate tenant create|list|key`: manage tenants and API keys straight in the database.

Same service functions as the admin API (gateway/tenants/service.py); the database is migrated first,
so these commands work on a fresh machine before the server has ever started.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import typer

app = typer.Typer(help="Manage tenants and their API keys.", no_args_is_help=True)

DB_OPTION = typer.Option(None, "--db", help="Database URL (default: RADIXGATE_DB_URL or sqlite:///./radixgate.db).")


@contextmanager
def open_session(db_url: str | None) -> Iterator:
    """A committed-on-success session on the (migrated) database at `db_url`."""
    from gateway.db.migrate import upgrade
    from gateway.db.session import make_engine, make_session_factory, session_scope
    from gateway.settings import Settings

    url = db_url or Settings().db_url
    upgrade(url)
    engine = make_engine(url)
    try:
        with session_scope(make_session_factory(engine)) as session:
            yield session
    finally:
        engine.dispose()


@app.command("create")
def create(
    name: str = typer.Argument(..., help="Tenant name (unique)."),
    pin_quota: int = typer.Option(0, "--pin-quota", min=0, help="Tokens this tenant may pin."),
    cache_group: str = typer.Option(None, "--cache-group", help="Share a prefix-cache namespace with this group."),
    max_concurrency: int = typer.Option(None, "--max-concurrency", min=1, help="Concurrent requests allowed."),
    dynamic_rule: list[str] = typer.Option(
        None, "--dynamic-rule", help="NAME=REGEX: a sentence matching REGEX is dynamic content (repeatable)."
    ),
    db: str = DB_OPTION,
) -> None:
    """Create a tenant and print its first API key (shown once)."""
    from gateway.tenants import service as tenants

    rules = parse_dynamic_rules(dynamic_rule or [])
    with open_session(db) as session:
        try:
            issued = tenants.create_tenant(
                session,
                name,
                pin_quota_tokens=pin_quota,
                cache_group=cache_group,
                max_concurrency=max_concurrency,
                dynamic_rules=rules,
            )
        except tenants.TenantExistsError as exc:
            raise typer.BadParameter(str(exc), param_hint="NAME") from exc
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--dynamic-rule") from exc
        key_id = issued.api_key.id
    typer.echo(f"created tenant {name!r} (key id {key_id})")
    typer.echo(f"API key (shown once, stored hashed): {issued.key}")


def parse_dynamic_rules(values: list[str]) -> dict[str, str]:
    """`NAME=REGEX` options as {name: regex}; raises typer.BadParameter for a value without `=`."""
    rules = {}
    for value in values:
        name, sep, pattern = value.partition("=")
        if not sep or not name.strip() or not pattern:
            raise typer.BadParameter(f"expected NAME=REGEX, got {value!r}", param_hint="--dynamic-rule")
        rules[name.strip()] = pattern
    return rules


@app.command("list")
def list_(db: str = DB_OPTION) -> None:
    """List tenants with their quotas, cache groups and active keys' prefixes."""
    from gateway.tenants import service as tenants

    with open_session(db) as session:
        rows = []
        for tenant in tenants.list_tenants(session):
            keys = [k.prefix + "..." for k in tenants.list_keys(session, tenant) if k.revoked_at is None]
            rows.append((tenant.name, tenant.pin_quota_tokens or 0, tenant.cache_group or "-", ", ".join(keys) or "-"))
    typer.echo(f"{'name':<24} {'pin_quota':>10}  {'cache_group':<16} active keys")
    for name, quota, group, keys in rows:
        typer.echo(f"{name:<24} {quota:>10}  {group:<16} {keys}")


@app.command("key")
def key(name: str = typer.Argument(..., help="Tenant name."), db: str = DB_OPTION) -> None:
    """Issue another API key for a tenant and print it (shown once)."""
    from gateway.tenants import service as tenants

    with open_session(db) as session:
        try:
            issued = tenants.issue_key(session, tenants.require_tenant(session, name))
        except tenants.TenantNotFoundError as exc:
            raise typer.BadParameter(str(exc), param_hint="NAME") from exc
        key_id = issued.api_key.id
    typer.echo(f"API key for {name!r} (key id {key_id}; shown once, stored hashed): {issued.key}")
