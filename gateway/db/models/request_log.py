"""The request log: one row per chat request, no prompt text, with the indexes the stats and the doctor read."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Boolean, Float, Index, Integer, String, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from gateway.db.models.base import Base, UtcDateTime, new_uuid, utc_now


# Every column the stats queries read: both stats indexes cover them, so the queries scan an
# index and never the wide table rows (1M-row stats stay under a second on SQLite).
STATS_COLUMNS = (
    "status", "template", "miss_cause", "error_code",
    "prompt_tokens", "cached_tokens", "shadow_cached_tokens", "completion_tokens", "ttft_ms",
    "canonicalized", "canonical_cached_tokens", "canonical_prompt_tokens", "host_cached_tokens",
)


# What the doctor's per-tenant queries read (gateway/db/doctor_queries.py), behind tenant and time:
# its index covers every one of them (the loss sums, the system-prefix keys, the tool-list count).
DOCTOR_COLUMNS = (
    "tenant_id", "created_at", "canonicalized", "was_canonical", "miss_cause", "sections_found", "dynamic_patterns",
    "prompt_tokens", "cached_tokens", "shadow_cached_tokens", "canonical_cached_tokens", "canonical_prompt_tokens",
    "static_prefix_tokens", "system_prefix_tokens", "system_hash", "tools_hash",
)


class RequestLog(Base):
    """One row per chat request, written off the hot path by the log writer. No prompt text."""

    __tablename__ = "request_log"
    __table_args__ = (
        Index("ix_request_log_tenant_created", "tenant_id", "created_at", *STATS_COLUMNS),  # one tenant
        Index("ix_request_log_created", "created_at", "tenant_id", *STATS_COLUMNS),  # all tenants
        Index("ix_request_log_tenant_ttft", "tenant_id", "ttft_ms", "created_at"),  # TTFT percentiles
        # the doctor's per-tenant counterfactual sums (gateway/db/doctor_queries.py), index-only
        Index("ix_request_log_doctor", *DOCTOR_COLUMNS),
        # the doctor's first sightings of a system prefix in other tenants
        Index("ix_request_log_system", "system_hash", "tools_hash", "canonicalized", "tenant_id", "created_at"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_uuid)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    tenant_id: Mapped[int | None] = mapped_column(Integer)  # no FK: logs outlive deleted tenants
    api_key_id: Mapped[int | None] = mapped_column(Integer)
    template: Mapped[str | None] = mapped_column(String(128))
    template_version: Mapped[int | None] = mapped_column(Integer)
    model: Mapped[str | None] = mapped_column(String(256))
    backend: Mapped[str | None] = mapped_column(String(128))
    sections_found: Mapped[str | None] = mapped_column(String(128))  # comma list
    dynamic_hoisted: Mapped[bool] = mapped_column(Boolean, default=False)
    was_canonical: Mapped[bool] = mapped_column(Boolean, default=False)
    canonicalized: Mapped[bool] = mapped_column(Boolean, default=True)
    dynamic_patterns: Mapped[str | None] = mapped_column(String(512))  # comma list of rule names
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    # None: unknown (a remote that reports none, or whose cache is not tenant-private; routing/remote.py)
    cached_tokens: Mapped[int | None] = mapped_column(Integer, default=0)
    # the router's predicted hit on the node it chose (routing/route_index.py); None: not routed
    predicted_cached_tokens: Mapped[int | None] = mapped_column(Integer)
    failovers: Mapped[int | None] = mapped_column(Integer)  # nodes that failed before their first output
    host_cached_tokens: Mapped[int] = mapped_column(Integer, default=0)  # of cached_tokens, from the host tier
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    shadow_cached_tokens: Mapped[int | None] = mapped_column(Integer)  # raw order, unbounded cache
    # The canonical order on an unbounded cache of the domain's traffic (gateway/insight/counterfactual.py);
    # None where the canonical shadow was off or the request had no canonical rendering.
    canonical_cached_tokens: Mapped[int | None] = mapped_column(Integer)
    canonical_prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    static_prefix_tokens: Mapped[int | None] = mapped_column(Integer)  # canonical system + tools + context
    system_prefix_tokens: Mapped[int | None] = mapped_column(Integer)  # canonical system + tools
    ttft_ms: Mapped[float | None] = mapped_column(Float)
    latency_ms: Mapped[float | None] = mapped_column(Float)
    status: Mapped[str] = mapped_column(String(16), default="ok")
    error_code: Mapped[str | None] = mapped_column(String(64))
    system_hash: Mapped[str | None] = mapped_column(String(32))
    tools_hash: Mapped[str | None] = mapped_column(String(32))
    context_hash: Mapped[str | None] = mapped_column(String(32))
    history_hash: Mapped[str | None] = mapped_column(String(32))
    dynamic_hash: Mapped[str | None] = mapped_column(String(32))
    question_hash: Mapped[str | None] = mapped_column(String(32))
    miss_cause: Mapped[str | None] = mapped_column(String(16))



REQUEST_LOG_COLUMNS = frozenset(c.name for c in RequestLog.__table__.columns)
