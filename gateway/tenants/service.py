"""Tenants, their API keys and the admin key: the service layer under the admin API and CLI.

Invariants:
- A key's plaintext exists only in the value returned when it is issued; the database keeps
  `sha256(key)` (hex) and a short display prefix. Verification hashes the presented key and
  looks the hash up, so no plaintext comparison ever happens.
- Functions here take a session and never commit: the caller's session scope commits or rolls
  back in one place (deps.SessionDep for routes, session_scope for the CLI and start-up).
- Cache namespaces are computed in one place, `gateway.routing.base.cache_namespace`.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from gateway.db.models import AdminKey, ApiKey, Tenant
from gateway.tenants.dynamic_rules import dump_rules, validate_rules

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from gateway.settings import Settings

logger = logging.getLogger(__name__)

TENANT_KEY_PREFIX = "sk-rg-"
ADMIN_KEY_PREFIX = "sk-rgadmin-"
NUM_DISPLAY_CHARS = 12


class TenantExistsError(ValueError):
    """A tenant with that name already exists."""


class TenantNotFoundError(LookupError):
    """No tenant has that name."""


class KeyNotFoundError(LookupError):
    """No API key has that id."""


@dataclass(frozen=True)
class IssuedKey:
    """A freshly issued key: `key` is the plaintext, shown to its owner exactly once."""

    api_key: ApiKey
    key: str


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def hash_key(key: str) -> str:
    """The stored form of a key: sha256 of its UTF-8 bytes, hex."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def generate_key(prefix: str = TENANT_KEY_PREFIX) -> str:
    """A new random key (256 bits of entropy) starting with `prefix`."""
    return prefix + secrets.token_urlsafe(32)


def display_prefix(key: str) -> str:
    """The part of a key safe to show in listings (identifies it, cannot authenticate)."""
    return key[:NUM_DISPLAY_CHARS]


def create_tenant(
    session: Session,
    name: str,
    *,
    pin_quota_tokens: int = 0,
    cache_group: str | None = None,
    max_concurrency: int | None = None,
    dynamic_rules: dict[str, str] | None = None,
) -> IssuedKey:
    """Create a tenant and its first API key.

    Raises TenantExistsError on a taken name, ValueError (naming the rule) on a bad dynamic rule.
    """
    rules_text = dump_rules(validate_rules(dynamic_rules))
    if get_tenant(session, name) is not None:
        raise TenantExistsError(f"tenant {name!r} already exists")
    tenant = Tenant(
        name=name,
        pin_quota_tokens=pin_quota_tokens,
        cache_group=cache_group or None,
        max_concurrency=max_concurrency,
        dynamic_rules=rules_text,
    )
    session.add(tenant)
    try:
        session.flush()
    except IntegrityError as exc:  # a concurrent create won the race for the name
        raise TenantExistsError(f"tenant {name!r} already exists") from exc
    return issue_key(session, tenant)


MUTABLE_FIELDS = ("pin_quota_tokens", "cache_group", "max_concurrency", "dynamic_rules")


def update_tenant(session: Session, name: str, changes: dict) -> Tenant:
    """Apply `changes` (keys from MUTABLE_FIELDS) to a tenant; absent keys stay as they are.

    Raises TenantNotFoundError, or ValueError for an unknown field or a bad dynamic rule (naming it).
    """
    unknown = set(changes) - set(MUTABLE_FIELDS)
    if unknown:
        raise ValueError(f"cannot update tenant field(s) {sorted(unknown)}")
    tenant = require_tenant(session, name)
    for field, value in changes.items():
        if field == "dynamic_rules":
            value = dump_rules(validate_rules(value))
        elif field == "cache_group":
            value = value or None
        setattr(tenant, field, value)
    session.flush()
    return tenant


def get_tenant(session: Session, name: str) -> Tenant | None:
    return session.scalar(select(Tenant).where(Tenant.name == name))


def require_tenant(session: Session, name: str) -> Tenant:
    """The tenant called `name`; raises TenantNotFoundError."""
    tenant = get_tenant(session, name)
    if tenant is None:
        raise TenantNotFoundError(f"no tenant named {name!r}")
    return tenant


def list_tenants(session: Session) -> list[Tenant]:
    return list(session.scalars(select(Tenant).order_by(Tenant.id)))


def list_keys(session: Session, tenant: Tenant) -> list[ApiKey]:
    """All of a tenant's keys, revoked ones included (their revoked_at is set)."""
    return list(session.scalars(select(ApiKey).where(ApiKey.tenant_id == tenant.id).order_by(ApiKey.id)))


def issue_key(session: Session, tenant: Tenant) -> IssuedKey:
    """A new API key for `tenant`; only its hash and display prefix are stored."""
    key = generate_key()
    api_key = ApiKey(tenant_id=tenant.id, key_hash=hash_key(key), prefix=display_prefix(key), created_at=utc_now())
    session.add(api_key)
    session.flush()
    return IssuedKey(api_key=api_key, key=key)


def revoke_key(session: Session, key_id: int) -> ApiKey:
    """Mark a key revoked (idempotent: a revoked key keeps its first revoked_at). Raises KeyNotFoundError."""
    api_key = session.get(ApiKey, key_id)
    if api_key is None:
        raise KeyNotFoundError(f"no API key with id {key_id}")
    if api_key.revoked_at is None:
        api_key.revoked_at = utc_now()
        session.flush()
    return api_key


def authenticate(session: Session, key: str) -> tuple[Tenant, ApiKey] | None:
    """The tenant and key a presented bearer key belongs to, or None if unknown or revoked.

    Touches the key's last_used_at.
    """
    found = find_key(session, key)
    if found is not None:
        found[1].last_used_at = utc_now()
    return found


def find_key(session: Session, key: str) -> tuple[Tenant, ApiKey] | None:
    """Like `authenticate`, but only reads (the request path touches last_used_at separately)."""
    api_key = session.scalar(select(ApiKey).where(ApiKey.key_hash == hash_key(key)))
    if api_key is None or api_key.revoked_at is not None:
        return None
    tenant = session.get(Tenant, api_key.tenant_id)
    if tenant is None:
        return None
    return tenant, api_key


def touch_key(session: Session, key_id: int) -> None:
    """Set the key's last_used_at to now (one UPDATE; no-op for an unknown id)."""
    session.execute(update(ApiKey).where(ApiKey.id == key_id).values(last_used_at=utc_now()))


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
    row = session.get(AdminKey, key_id)
    if row is None:
        raise KeyNotFoundError(f"no admin key with id {key_id}")
    if row.revoked_at is None:
        row.revoked_at = utc_now()
        session.flush()
    return row


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
