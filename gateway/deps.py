"""FastAPI dependencies, as typed aliases so handler signatures read as prose.

    async def list_pins(tenant: TenantDep, session: SessionDep, gw: StateDep): ...

- SessionDep: a request-scoped SQLAlchemy session; committed when the handler
  returns, rolled back if it raises (gateway.db.session.session_scope, the one place).
- CallerDep / TenantDep: the caller resolved from `Authorization: Bearer <key>`;
  401 in OpenAI's error shape otherwise. Authentication uses its own short
  session (committed at once: it touches the key's last_used_at), so the Tenant
  handed to the handler is detached with its columns loaded. A long streaming
  response therefore never holds a database transaction open.
- AdminDep: the admin key (RADIXGATE_ADMIN_KEY or a stored admin hash); 401 otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from gateway import tenants
from gateway.db.models import Tenant
from gateway.db.session import session_scope
from gateway.errors import unauthorized
from gateway.settings import Settings
from gateway.state import GatewayState


def get_state(request: Request) -> GatewayState:
    return request.app.state.gw


StateDep = Annotated[GatewayState, Depends(get_state)]


def get_settings(gw: StateDep) -> Settings:
    return gw.settings


SettingsDep = Annotated[Settings, Depends(get_settings)]


def get_session(gw: StateDep) -> Iterator[Session]:
    with session_scope(gw.session_factory) as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]


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


def get_caller(request: Request, gw: StateDep) -> Caller:
    key = bearer_key(request)
    with session_scope(gw.session_factory) as session:
        found = tenants.authenticate(session, key)
        if found is None:
            raise unauthorized("Incorrect API key provided.")
        tenant, api_key = found
        session.flush()
        session.expunge(tenant)
        caller = Caller(tenant=tenant, api_key_id=api_key.id)
    return caller


CallerDep = Annotated[Caller, Depends(get_caller)]


def get_tenant(caller: CallerDep) -> Tenant:
    return caller.tenant


TenantDep = Annotated[Tenant, Depends(get_tenant)]


def require_admin(request: Request, gw: StateDep) -> None:
    key = bearer_key(request)
    with session_scope(gw.session_factory) as session:
        if not tenants.is_admin_key(session, key, gw.settings):
            raise unauthorized("Incorrect admin key provided.")


AdminDep = Annotated[None, Depends(require_admin)]
