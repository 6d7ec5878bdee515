"""Tenants, their API keys, the admin keys, and the pins a tenant holds."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from gateway.db.models.base import Base, UtcDateTime, utc_now


class Tenant(Base):
    __tablename__ = "tenants"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    pin_quota_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cache_group: Mapped[str | None] = mapped_column(String(128))
    max_concurrency: Mapped[int | None] = mapped_column(Integer)
    # Per-minute limits (None: the settings' default; gateway/tenants/rate_limits.py).
    requests_per_minute: Mapped[int | None] = mapped_column(Integer)
    tokens_per_minute: Mapped[int | None] = mapped_column(Integer)
    store_prompts: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    # The tenant's own dynamic-content rules, {name: regex} as JSON text (None: the defaults only).
    dynamic_rules: Mapped[str | None] = mapped_column(Text)


class ApiKey(Base):
    """A tenant key: only its sha256 hash is stored; `prefix` is the first characters, for display."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    key_hash: Mapped[str] = mapped_column(String(128), unique=True)
    prefix: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    last_used_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class AdminKey(Base):
    """An admin key: only its sha256 hash is stored. `origin`: "generated" (the first start's key),
    "configured" (RADIXGATE_ADMIN_KEY), "rotated" (`radixgate admin-key rotate`) or "unknown" (before 0005).
    A key with revoked_at set never authenticates again."""

    __tablename__ = "admin_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key_hash: Mapped[str] = mapped_column(String(128), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    prefix: Mapped[str | None] = mapped_column(String(32))
    origin: Mapped[str] = mapped_column(String(16), default="unknown", server_default="unknown")
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)




class Pin(Base):
    """A pinned static prefix; `deleted_at` set = unpinned (kept for history); `expires_at` from ttl_seconds."""

    __tablename__ = "pins"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    namespace: Mapped[str] = mapped_column(String(256))
    template: Mapped[str | None] = mapped_column(String(128))
    num_tokens: Mapped[int] = mapped_column(Integer)
    token_hash: Mapped[str] = mapped_column(String(64))
    ttl_seconds: Mapped[int | None] = mapped_column(Integer)
    expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    deleted_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    hits: Mapped[int] = mapped_column(Integer, default=0)
    # Where the gateway keeps what it needs to re-warm the pin on start (rendered sections as JSON).
    spec_json: Mapped[str | None] = mapped_column(Text)
