"""Tenants and their API keys: the service layer under the admin API and CLI (admin keys: admin_keys.py).

Invariants:
- A key's plaintext exists only in the value returned when it is issued; the database keeps
  `sha256(key)` (hex) and a short display prefix. Verification hashes the presented key and
  looks the hash up, so no plaintext comparison ever happens.
- Functions here take a session and never commit: the caller's session scope commits or rolls
  back in one place (deps.SessionDep for routes, session_scope for the CLI and start-up).
- Cache namespaces are computed in one place, `gateway.tenants.isolation.cache_namespace`.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from gateway.db.models import ApiKey, Tenant
from gateway.tenants.dynamic_rules import dump_rules, validate_rules

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

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
    requests_per_minute: int | None = None,
    tokens_per_minute: int | None = None,
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
        requests_per_minute=requests_per_minute,
        tokens_per_minute=tokens_per_minute,
    )
    session.add(tenant)
    try:
        session.flush()
    except IntegrityError as exc:  # a concurrent create won the race for the name
        raise TenantExistsError(f"tenant {name!r} already exists") from exc
    return issue_key(session, tenant)


MUTABLE_FIELDS = ("pin_quota_tokens", "cache_group", "max_concurrency", "dynamic_rules",
                  "requests_per_minute", "tokens_per_minute")


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
    return revoke_row(session, ApiKey, key_id, "API key")


def revoke_row(session: Session, model: type, key_id: int, kind: str):
    """Set a key row's revoked_at once (a revoked row keeps its first); KeyNotFoundError naming `kind`."""
    row = session.get(model, key_id)
    if row is None:
        raise KeyNotFoundError(f"no {kind} with id {key_id}")
    if row.revoked_at is None:
        row.revoked_at = utc_now()
        session.flush()
    return row


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
