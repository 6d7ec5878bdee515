"""Normalizing a request-log row dict (keys = RequestLog columns) before it is queued.

Every normalized row has exactly the same keys (all RequestLog columns), so a batch is one
executemany; it carries a client-generated uuid `id`, so inserting it twice writes it once.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

from sqlalchemy import String

from gateway.db.models import REQUEST_LOG_COLUMNS, RequestLog

LIST_COLUMNS = ("sections_found", "dynamic_patterns")


def column_defaults() -> dict[str, object]:
    """Scalar Python-side defaults of RequestLog columns (None where a column has none)."""
    defaults: dict[str, object] = {}
    for column in RequestLog.__table__.columns:
        default = column.default
        defaults[column.name] = default.arg if default is not None and default.is_scalar else None
    return defaults


def string_lengths() -> dict[str, int]:
    """Declared maximum length of each bounded string column."""
    return {
        column.name: column.type.length
        for column in RequestLog.__table__.columns
        if isinstance(column.type, String) and column.type.length
    }


class RowNormalizer:
    """Turns a caller's row dict into a full, insertable row; unknown keys are reported, not inserted.
    Over-long strings are cut to the column's length (PostgreSQL would reject the whole row)."""

    def __init__(self) -> None:
        self._defaults = column_defaults()
        self._lengths = string_lengths()

    def normalize(self, row: dict) -> tuple[dict, set[str]]:
        """Return (full row, unknown keys). Raises ValueError/TypeError on a value that cannot be fixed."""
        unknown = set(row) - REQUEST_LOG_COLUMNS
        full = dict(self._defaults)
        full.update((key, value) for key, value in row.items() if key in REQUEST_LOG_COLUMNS)
        full["id"] = to_uuid(full["id"])
        full["created_at"] = to_utc(full["created_at"])
        for key in LIST_COLUMNS:
            if isinstance(full[key], (list, tuple, set)):
                full[key] = ",".join(str(item) for item in full[key])
        for key, length in self._lengths.items():
            value = full[key]
            if isinstance(value, str) and len(value) > length:
                full[key] = value[:length]
        return full, unknown


def to_uuid(value: object) -> uuid.UUID:
    if value is None:
        return uuid.uuid4()
    if isinstance(value, uuid.UUID):
        return value
    return uuid.UUID(str(value))


def to_utc(value: datetime | None) -> datetime:
    """Aware UTC datetime; None means now; a naive datetime is taken to be UTC already."""
    if value is None:
        return datetime.now(timezone.utc)
    if not isinstance(value, datetime):
        raise TypeError(f"created_at must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)
