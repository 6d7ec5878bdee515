"""FastAPI dependencies, as typed aliases so handler signatures read as prose.

    async def list_pins(tenant: TenantDep, session: SessionDep, gw: StateDep): ...

- RequestPathDep, PreparerDep, ServedModelsDep, PinnerDep, LimitsDep, SessionFactoryDep: the one service a
  handler uses,
  so request-path handlers never hold the whole GatewayState.

- SessionDep: a SQLAlchemy session for one handler call; committed when the handler
  returns and *before the response is sent* (dependency scope "function"), rolled back
  if it raises (gateway.db.session.session_scope, the one place). So a client never holds
  an answer (a key, a template version, a pin) whose write has not committed; a failed
  commit is a 5xx instead.
- CallerDep / TenantDep: the caller resolved from `Authorization: Bearer <key>` (or Anthropic's
  `x-api-key: <key>`); 401 in the route's error shape otherwise. Callers are cached on gw.auth_cache (TTL,
  stale-if-error: a database outage does not fail requests from known keys).
  Authentication uses its own short read-only session, then queues a best-effort
  touch of the key's last_used_at (written off the request path), so the Tenant
  handed to the handler is detached with its columns loaded. A long streaming
  response therefore never holds a database transaction open.
- AdminDep: a live (unrevoked) stored admin key; 401 otherwise.
- MetricsAccessDep: nothing unless settings.protect_metrics; then the admin key or
  settings.metrics_token.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from gateway.db.models import Tenant
from gateway.db.session import session_scope
from gateway.db.side_writer import write_aside
from gateway.errors import database_unavailable, is_database_unavailable, service_unavailable, unauthorized
from gateway.generation.path import RequestPath
from gateway.generation.preparer import Preparer
from gateway.generation.served_models import ServedModels
from gateway.pins.service import Pinner
from gateway.settings import LimitSettings
from gateway.state import GatewayState
from gateway.tenants import service as tenants
from gateway.tenants import admin_keys

log = logging.getLogger(__name__)


def get_state(request: Request) -> GatewayState:
    return request.app.state.gw


StateDep = Annotated[GatewayState, Depends(get_state)]


def get_session(gw: StateDep) -> Iterator[Session]:
    with session_scope(gw.session_factory) as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session, scope="function")]


def get_session_factory(gw: StateDep) -> sessionmaker[Session]:
    return gw.session_factory


SessionFactoryDep = Annotated[sessionmaker[Session], Depends(get_session_factory)]


def get_request_path(gw: StateDep) -> RequestPath:
    return gw.path


RequestPathDep = Annotated[RequestPath, Depends(get_request_path)]


def get_preparer(gw: StateDep) -> Preparer:
    """The gateway's Preparer; 503 on a gateway with no backend (nothing to tokenize for)."""
    if gw.path.preparer is None:
        raise service_unavailable("No backend is configured: the embedded engine is disabled and no remotes are set.")
    return gw.path.preparer


PreparerDep = Annotated[Preparer, Depends(get_preparer)]


def get_served_models(gw: StateDep) -> ServedModels:
    return gw.path.models


ServedModelsDep = Annotated[ServedModels, Depends(get_served_models)]


def get_pinner(gw: StateDep) -> Pinner:
    return gw.pins


PinnerDep = Annotated[Pinner, Depends(get_pinner)]


def get_limits(gw: StateDep) -> LimitSettings:
    return gw.settings.limits


LimitsDep = Annotated[LimitSettings, Depends(get_limits)]


@dataclass(frozen=True)
class Caller:
    """Who is calling: the (detached) tenant and the id of the key they used."""

    tenant: Tenant
    api_key_id: int


def bearer_key(request: Request) -> str:
    """The key from `Authorization: Bearer <key>`; 401 if the header is missing or malformed."""
    header = request.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise unauthorized("Missing API key: send 'Authorization: Bearer <key>'.")
    return key.strip()


def tenant_key(request: Request) -> str:
    """A tenant's key: Anthropic's `x-api-key` header when sent, else the bearer token; 401 without either."""
    key = request.headers.get("x-api-key", "").strip()
    if key:
        return key
    if not request.headers.get("authorization"):
        raise unauthorized("Missing API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'.")
    return bearer_key(request)


def get_caller(request: Request, gw: StateDep) -> Caller:
    """The caller for the bearer key: from gw.auth_cache while fresh, else from the database.

    If the database cannot be read (down, or no pooled connection within db_pool_timeout_s), a cached caller is served past its TTL (up to
    auth_cache_stale_s, logged); a key never seen before gets 503. last_used_at is touched
    when the database is read (so at most once per TTL per key) and never fails the request.
    """
    key = tenant_key(request)
    cache = gw.auth_cache
    digest = tenants.hash_key(key)
    cached = cache.lookup_fresh(digest) if cache is not None else None
    if cached is not None:
        return cached
    try:
        caller = load_caller(gw, key)
    except SQLAlchemyError as exc:
        if not is_database_unavailable(exc):
            raise
        stale = cache.lookup_stale(digest) if cache is not None else None
        if stale is None:
            raise database_unavailable() from exc
        log.warning("database unavailable (%s); serving cached credentials for key %d", type(exc).__name__, stale.api_key_id)
        return stale
    if caller is None:
        if cache is not None:
            cache.forget(digest)
        raise unauthorized("Incorrect API key provided.")
    if cache is not None:
        cache.store(digest, caller, caller.api_key_id)
    touch_last_used(gw, caller.api_key_id)
    return caller


def load_caller(gw: GatewayState, key: str) -> Caller | None:
    """The caller for `key` read from the database (read-only), or None. Raises DBAPIError if it is down."""
    with session_scope(gw.session_factory) as session:
        found = tenants.find_key(session, key)
        if found is None:
            return None
        tenant, api_key = found
        session.expunge(tenant)
        return Caller(tenant=tenant, api_key_id=api_key.id)


def touch_last_used(gw: GatewayState, api_key_id: int) -> None:
    """Best effort: a failed last_used_at update is logged, never raised. It runs on the app's SideWriter,
    off the request path (a key already waiting is not queued twice); a state a test builds without one
    writes here."""
    write_aside(gw.side_writer, gw.session_factory, partial(tenants.touch_key, key_id=api_key_id), ("last_used_at", api_key_id))


CallerDep = Annotated[Caller, Depends(get_caller)]


def get_tenant(caller: CallerDep) -> Tenant:
    return caller.tenant


TenantDep = Annotated[Tenant, Depends(get_tenant)]


def require_admin(request: Request, gw: StateDep) -> None:
    key = bearer_key(request)
    with session_scope(gw.session_factory) as session:
        if not admin_keys.is_admin_key(session, key, gw.settings):
            raise unauthorized("Incorrect admin key provided.")


AdminDep = Annotated[None, Depends(require_admin)]


def require_metrics_access(request: Request, gw: StateDep) -> None:
    settings = gw.settings
    if not settings.protect_metrics:
        return
    key = bearer_key(request)
    token = settings.metrics_token.get_secret_value() if settings.metrics_token is not None else ""
    if token and hmac.compare_digest(key.encode("utf-8"), token.encode("utf-8")):
        return
    require_admin(request, gw)


MetricsAccessDep = Annotated[None, Depends(require_metrics_access)]
