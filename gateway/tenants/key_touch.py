"""The best-effort `api_keys.last_used_at` write; gateway/deps.py runs it on the gateway's SideWriter
(gateway/db/side_writer.py), off the request path."""

from __future__ import annotations

import logging

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from gateway.db.session import session_scope
from gateway.tenants.service import touch_key

log = logging.getLogger("gateway.tenants")


def write_last_used(session_factory: sessionmaker[Session], api_key_id: int) -> None:
    """Set the key's last_used_at now, in its own session; a failure is logged, never raised."""
    try:
        with session_scope(session_factory) as session:
            touch_key(session, api_key_id)
    except SQLAlchemyError as exc:
        log.warning("could not touch last_used_at of key %d: %s", api_key_id, type(exc).__name__)
