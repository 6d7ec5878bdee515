"""Alembic environment: migrates the URL given by gateway.db.migrate, else $RADIXGATE_DB_URL,
else the default SQLite file. Batch mode is on so ALTERs work on SQLite."""

import os

from alembic import context
from sqlalchemy import text

from gateway.db.models import Base
from gateway.db.session import DEFAULT_DB_URL, make_engine

target_metadata = Base.metadata
MIGRATION_LOCK_KEY = 0x7261646978  # "radix"


def resolve_url() -> str:
    config = context.config
    return (
        config.attributes.get("db_url")
        or os.environ.get("RADIXGATE_DB_URL")
        or config.get_main_option("sqlalchemy.url")
        or DEFAULT_DB_URL
    )


def run_migrations_offline() -> None:
    context.configure(url=resolve_url(), target_metadata=target_metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = make_engine(resolve_url())
    try:
        with engine.connect() as connection:
            context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
            with context.begin_transaction():
                if connection.dialect.name == "postgresql":
                    # replicas starting together migrate one at a time (released at commit)
                    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
