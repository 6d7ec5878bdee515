"""`radixgate db upgrade|downgrade|current [--db URL]`: Alembic migrations without alembic.ini fiddling."""

import typer

from gateway.db.session import DEFAULT_DB_URL

app = typer.Typer(help="Database schema: run, revert and show migrations.", no_args_is_help=True)

DbOption = typer.Option(DEFAULT_DB_URL, "--db", envvar="RADIXGATE_DB_URL", help="SQLAlchemy database URL.")


@app.command("upgrade")
def upgrade(revision: str = typer.Argument("head", help="Target revision."), db: str = DbOption) -> None:
    """Apply pending migrations (the server also does this on start)."""
    from gateway.db import migrate

    migrate.upgrade(db, revision)
    typer.echo(f"{redacted(db)} at revision {migrate.current(db)}")


@app.command("downgrade")
def downgrade(revision: str = typer.Argument(..., help="Target revision, e.g. base or 0001."), db: str = DbOption) -> None:
    """Revert migrations down to REVISION ("base" drops every table)."""
    from gateway.db import migrate

    migrate.downgrade(db, revision)
    typer.echo(f"{redacted(db)} at revision {migrate.current(db) or 'base'}")


@app.command("current")
def current(db: str = DbOption) -> None:
    """Print the database's revision (or "base" when it has none)."""
    from gateway.db import migrate

    typer.echo(migrate.current(db) or "base")


def redacted(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
