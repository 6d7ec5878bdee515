"""`radixgate admin-key rotate|revoke|list`: the admin keys, straight in the database.

An admin key is root on the gateway. Rotating issues a new key (printed once, stored hashed) and
revokes every other admin key, the configured RADIXGATE_ADMIN_KEY's row included; a running
server reads admin keys from the database on every admin request, so the change is immediate.
"""

from __future__ import annotations

import typer

from gateway.cli.tenant import DB_OPTION, open_session

app = typer.Typer(help="Rotate, revoke and list admin keys.", no_args_is_help=True)


@app.command("rotate")
def rotate(db: str = DB_OPTION) -> None:
    """Issue a new admin key (shown once) and revoke all others."""
    from gateway.tenants import admin_keys

    with open_session(db) as session:
        row, key = admin_keys.rotate_admin_key(session)
        key_id = row.id
    typer.echo(f"new admin key (id {key_id}; shown once, stored hashed; every other admin key is revoked): {key}")


@app.command("revoke")
def revoke(key_id: int = typer.Argument(..., help="Admin key id (see `radixgate admin-key list`)."), db: str = DB_OPTION) -> None:
    """Revoke one admin key."""
    from gateway.tenants import service as tenants
    from gateway.tenants import admin_keys

    with open_session(db) as session:
        try:
            admin_keys.revoke_admin_key(session, key_id)
        except tenants.KeyNotFoundError as exc:
            raise typer.BadParameter(str(exc), param_hint="KEY_ID") from exc
    typer.echo(f"revoked admin key {key_id}")


@app.command("list")
def list_(db: str = DB_OPTION) -> None:
    """Admin keys: id, display prefix, origin, created, revoked (never the keys)."""
    from gateway.tenants import admin_keys

    with open_session(db) as session:
        rows = [(k.id, k.prefix or "-", k.origin, k.created_at, k.revoked_at) for k in admin_keys.list_admin_keys(session)]
    typer.echo(f"{'id':>4}  {'prefix':<14} {'origin':<10} {'created':<26} revoked")
    for key_id, prefix, origin, created, revoked in rows:
        typer.echo(f"{key_id:>4}  {prefix:<14} {origin:<10} {created.isoformat() if created else '-':<26} "
                   f"{revoked.isoformat() if revoked else '-'}")
