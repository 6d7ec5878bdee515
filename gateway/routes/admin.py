"""Admin API: tenants and their API keys. Every route needs the admin key (AdminDep).

A new key's plaintext appears once, in the response that issues it; only its hash is stored.
"""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel, Field

from gateway.db.models import ApiKey, Tenant
from gateway.deps import AdminDep, SessionDep, StateDep
from gateway.errors import bad_request, conflict, not_found
from gateway.tenants import service as tenants
from gateway.tenants.dynamic_rules import load_rules

router = APIRouter(prefix="/admin", tags=["admin"])


class TenantFields(BaseModel):
    """A tenant's settable fields and their bounds, one definition for create and update."""

    pin_quota_tokens: int = Field(default=0, ge=0)
    cache_group: str | None = Field(default=None, max_length=128)
    max_concurrency: int | None = Field(default=None, ge=1)
    requests_per_minute: int | None = Field(default=None, ge=1)
    tokens_per_minute: int | None = Field(default=None, ge=1)
    dynamic_rules: dict[str, str] | None = None


class TenantCreate(TenantFields):
    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class TenantUpdate(TenantFields):
    """PATCH body: only the fields sent change (the handler reads model_dump(exclude_unset=True));
    `dynamic_rules` replaces the tenant's rules ({} or null clears them)."""


class KeyOut(BaseModel):
    """A stored key as listings show it: never the key itself."""

    id: int
    prefix: str
    created_at: datetime | None
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None


class IssuedKeyOut(KeyOut):
    """A key at the moment it is issued: `key` is shown here and never again."""

    key: str
    tenant: str


class TenantOut(BaseModel):
    id: int
    name: str
    pin_quota_tokens: int
    cache_group: str | None
    max_concurrency: int | None
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    dynamic_rules: dict[str, str] = {}
    created_at: datetime | None
    keys: list[KeyOut] = []


class TenantCreated(TenantOut):
    api_key: IssuedKeyOut


def key_out(api_key: ApiKey) -> KeyOut:
    return KeyOut(
        id=api_key.id,
        prefix=api_key.prefix,
        created_at=api_key.created_at,
        last_used_at=api_key.last_used_at,
        revoked_at=api_key.revoked_at,
    )


def issued_key_out(issued: tenants.IssuedKey, tenant: Tenant) -> IssuedKeyOut:
    return IssuedKeyOut(**key_out(issued.api_key).model_dump(), key=issued.key, tenant=tenant.name)


def tenant_out(tenant: Tenant, keys: list[ApiKey]) -> dict:
    return {
        "id": tenant.id,
        "name": tenant.name,
        "pin_quota_tokens": tenant.pin_quota_tokens or 0,
        "cache_group": tenant.cache_group,
        "max_concurrency": tenant.max_concurrency,
        "requests_per_minute": tenant.requests_per_minute,
        "tokens_per_minute": tenant.tokens_per_minute,
        "dynamic_rules": load_rules(tenant.dynamic_rules),
        "created_at": tenant.created_at,
        "keys": [key_out(k) for k in keys],
    }


@router.post("/tenants", status_code=201, response_model=TenantCreated)
def create_tenant(body: TenantCreate, session: SessionDep, _: AdminDep) -> TenantCreated:
    """Create a tenant and return it with its first API key (shown once)."""
    try:
        issued = tenants.create_tenant(session, body.name, **body.model_dump(exclude={"name"}))
    except tenants.TenantExistsError as exc:
        raise conflict(str(exc), param="name", code="tenant_exists") from exc
    except ValueError as exc:  # a bad dynamic rule; the message names it
        raise bad_request(str(exc), "dynamic_rules", "invalid_dynamic_rule") from exc
    tenant = session.get(Tenant, issued.api_key.tenant_id)
    return TenantCreated(**tenant_out(tenant, [issued.api_key]), api_key=issued_key_out(issued, tenant))


@router.get("/tenants")
def list_tenants(session: SessionDep, _: AdminDep) -> dict:
    """All tenants with their keys' display prefixes (never the keys)."""
    data = [TenantOut(**tenant_out(t, tenants.list_keys(session, t))) for t in tenants.list_tenants(session)]
    return {"object": "list", "data": data}


@router.patch("/tenants/{name}", response_model=TenantOut)
def update_tenant(name: str, body: TenantUpdate, session: SessionDep, _: AdminDep) -> TenantOut:
    """Change a tenant's quota, cache group, concurrency limit or dynamic rules (only the fields sent)."""
    try:
        tenant = tenants.update_tenant(session, name, body.model_dump(exclude_unset=True))
    except tenants.TenantNotFoundError as exc:
        raise not_found(str(exc), param="name") from exc
    except ValueError as exc:  # a bad dynamic rule; the message names it
        raise bad_request(str(exc), "dynamic_rules", "invalid_dynamic_rule") from exc
    return TenantOut(**tenant_out(tenant, tenants.list_keys(session, tenant)))


@router.post("/tenants/{name}/keys", status_code=201, response_model=IssuedKeyOut)
def issue_key(name: str, session: SessionDep, _: AdminDep) -> IssuedKeyOut:
    """Issue another API key for a tenant (shown once)."""
    try:
        tenant = tenants.require_tenant(session, name)
    except tenants.TenantNotFoundError as exc:
        raise not_found(str(exc), param="name") from exc
    return issued_key_out(tenants.issue_key(session, tenant), tenant)


@router.delete("/keys/{key_id}")
def revoke_key(key_id: int, session: SessionDep, gw: StateDep, _: AdminDep) -> dict:
    """Revoke an API key; requests with it get 401 from then on (its cached caller is dropped too)."""
    try:
        api_key = tenants.revoke_key(session, key_id)
    except tenants.KeyNotFoundError as exc:
        raise not_found(str(exc), param="key_id") from exc
    if gw.auth_cache is not None:
        gw.auth_cache.invalidate(key_id)
    return {"id": api_key.id, "object": "api_key", "revoked": True, "revoked_at": api_key.revoked_at}
