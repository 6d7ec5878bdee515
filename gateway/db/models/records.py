"""What the gateway stores beside the log: the engine's periodic cache statistics and stored
Responses-API responses."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from gateway.db.models.base import Base, UtcDateTime, utc_now


class EngineStatSnapshot(Base):
    """Periodic engine cache statistics (token counts), for the dashboard's engine page."""

    __tablename__ = "engine_stat_snapshots"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now, index=True)
    backend: Mapped[str | None] = mapped_column(String(128))
    cached_tokens: Mapped[int] = mapped_column(Integer, default=0)
    pinned_tokens: Mapped[int] = mapped_column(Integer, default=0)
    evictable_tokens: Mapped[int] = mapped_column(Integer, default=0)
    num_evictions: Mapped[int] = mapped_column(Integer, default=0)
    stats_json: Mapped[str | None] = mapped_column(Text)



class StoredResponse(Base):
    """One stored Responses-API response: the resolved input items of its turn (the whole
    conversation it was generated from, previous turns included) and the response object itself
    (its output items among it), both as JSON text. Written once, after a successful generation."""

    __tablename__ = "responses"
    __table_args__ = (Index("ix_responses_tenant_created", "tenant_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    previous_response_id: Mapped[str | None] = mapped_column(String(64))
    chain_id: Mapped[str | None] = mapped_column(String(64))  # the chain's first response; NULL: this one is
    model: Mapped[str] = mapped_column(String(256))
    status: Mapped[str] = mapped_column(String(16))
    input_items_json: Mapped[str] = mapped_column(Text)
    response_json: Mapped[str] = mapped_column(Text)
