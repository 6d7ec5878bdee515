"""Persistence: models, sessions, migrations, the request-log writer and the shared stats queries.

The dashboard imports only this package (models and queries), never the rest of the gateway.
"""

from gateway.db.models import (
    AdminKey,
    ApiKey,
    Base,
    EngineStatSnapshot,
    Pin,
    RequestLog,
    Template,
    TemplateVersion,
    Tenant,
    UtcDateTime,
    utc_now,
)
from gateway.db.session import DEFAULT_DB_URL, make_engine, make_session_factory, session_scope

__all__ = [
    "AdminKey",
    "ApiKey",
    "Base",
    "DEFAULT_DB_URL",
    "EngineStatSnapshot",
    "Pin",
    "RequestLog",
    "Template",
    "TemplateVersion",
    "Tenant",
    "UtcDateTime",
    "make_engine",
    "make_session_factory",
    "session_scope",
    "utc_now",
]
