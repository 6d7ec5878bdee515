"""Admin keys: stored hashed as rows that can be listed, rotated and revoked; the first one is generated.

Invariants: only a stored, unrevoked row authenticates (no plaintext comparison); a configured
RADIXGATE_ADMIN_KEY counts through its own row, and storing it revokes generated and earlier
configured keys. Functions take a session and never commit, except `bootstrap_admin_key`, the
start-up step, which runs in its own session scope.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sqlalchemy import select

from gateway.db.models import AdminKey
from gateway.tenants.service import ADMIN_KEY_PREFIX, display_prefix, generate_key, hash_key, revoke_row, utc_now

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from gateway.settings import Settings

logger = logging.getLogger(__name__)


def is_admin_key(session: Session, key: str, settings: Settings | None = None) -> bool:
    """Whether `key` is a live admin key: its hash is stored and not revoked.

    RADIXGATE_ADMIN_KEY counts only through its stored row (ensure_admin_key), so revoking
    that row revokes the configured key too; `settings` is accepted for callers that pass it.
    """
    found = session.scalar(select(AdminKey).where(AdminKey.key_hash == hash_key(key)))
    return found is not None and found.revoked_at is None


def configured_admin_key(settings: Settings | None) -> str | None:
    """RADIXGATE_ADMIN_KEY as plain text (settings hold it as a SecretStr), or None."""
    value = getattr(settings, "admin_key", None)
    if value is None:
        return None
    if hasattr(value, "get_secret_value"):
        value = value.get_secret_value()
    return str(value) or None


def add_admin_key(session: Session, key: str, origin: str) -> AdminKey:
    row = AdminKey(key_hash=hash_key(key), prefix=display_prefix(key), origin=origin, created_at=utc_now())
    session.add(row)
    session.flush()
    return row


def ensure_admin_key(session: Session, configured_key: str | None) -> str | None:
    """Make sure an admin key exists; returns a newly generated plaintext key, else None.

    A configured key has its hash stored (once); every other generated, configured or pre-0005
    key is then revoked (rotated keys stay), so only the key in the configuration and keys
    issued by `radixgate admin-key rotate` work. A configured key whose row was revoked stays
    revoked (logged). With no configured key and no live admin key, a key is generated and only
    its hash stored; the caller shows the plaintext once.
    """
    if configured_key:
        digest = hash_key(configured_key)
        row = session.scalar(select(AdminKey).where(AdminKey.key_hash == digest))
        if row is None:
            row = add_admin_key(session, configured_key, "configured")
        elif row.revoked_at is not None:
            logger.warning("the configured admin key (id %d) was revoked; it stays revoked", row.id)
        revoke_admin_keys(session, keep=row.id, origins=("generated", "configured", "unknown"))
        return None
    if session.scalar(select(AdminKey.id).where(AdminKey.revoked_at.is_(None)).limit(1)) is not None:
        return None
    key = generate_key(ADMIN_KEY_PREFIX)
    add_admin_key(session, key, "generated")
    return key


def revoke_admin_keys(session: Session, keep: int | None, origins: tuple[str, ...] | None = None) -> list[int]:
    """Revoke every live admin key except `keep` (only those of `origins` when given); returns their ids."""
    query = select(AdminKey).where(AdminKey.revoked_at.is_(None))
    if keep is not None:
        query = query.where(AdminKey.id != keep)
    if origins is not None:
        query = query.where(AdminKey.origin.in_(origins))
    revoked = list(session.scalars(query))
    for row in revoked:
        row.revoked_at = utc_now()
    session.flush()
    return [row.id for row in revoked]


def rotate_admin_key(session: Session) -> tuple[AdminKey, str]:
    """A new admin key (origin "rotated"); every other live admin key is revoked. Returns (row, plaintext)."""
    key = generate_key(ADMIN_KEY_PREFIX)
    row = add_admin_key(session, key, "rotated")
    revoke_admin_keys(session, keep=row.id)
    return row, key


def revoke_admin_key(session: Session, key_id: int) -> AdminKey:
    """Revoke one admin key (idempotent). Raises KeyNotFoundError."""
    return revoke_row(session, AdminKey, key_id, "admin key")


def list_admin_keys(session: Session) -> list[AdminKey]:
    return list(session.scalars(select(AdminKey).order_by(AdminKey.id)))


def bootstrap_admin_key(session_factory: sessionmaker, settings: Settings) -> str | None:
    """Start-up step (called by the lifespan): ensure an admin key; print a generated one once.

    Returns the generated plaintext key (None when configured or already stored).
    """
    from gateway.db.session import session_scope

    with session_scope(session_factory) as session:
        key = ensure_admin_key(session, configured_admin_key(settings))
    if key is not None:
        banner = f"radixgate: generated admin key (shown once, stored hashed): {key}"
        print(banner, flush=True)
        logger.warning("generated a new admin key; it was printed once to stdout and is stored only as a hash")
    return key
