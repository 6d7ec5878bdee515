"""The request log's hourly roll-ups, each kept by a trigger on request_log: the stats sums (fine and
per tenant) and the doctor's loss sums."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Float, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from gateway.db.hourly import TABLE as HOURLY_TABLE, attach_trigger_ddl
from gateway.db.models.base import Base, UtcDateTime
from gateway.db.tenant_hourly import TABLE as TENANT_HOURLY_TABLE, create_trigger_sql as tenant_hourly_trigger_sql


class StatsSums:
    """The stats roll-ups' sum columns (hourly.SUMS, rollup.SUM_KEYS), shared by both tables."""

    requests: Mapped[int] = mapped_column(BigInteger, default=0)
    prompt_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cached_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    completion_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    shadow_cached_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    shadow_prompt_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    canonical_cached_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    canonical_prompt_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    errors: Mapped[int] = mapped_column(BigInteger, default=0)
    ttft_requests: Mapped[int] = mapped_column(BigInteger, default=0)
    host_cached_tokens: Mapped[int] = mapped_column(BigInteger, default=0)


class RequestLogHourly(StatsSums, Base):
    """The request log's stats sums per (tenant, UTC hour, template, miss cause, error code), kept
    by a trigger on request_log (gateway/db/hourly.py: sentinels instead of NULL keys, DDL)."""

    __tablename__ = HOURLY_TABLE

    tenant_id: Mapped[int] = mapped_column(Integer, primary_key=True)  # -1: no tenant
    hour: Mapped[datetime] = mapped_column(UtcDateTime, primary_key=True)
    template: Mapped[str] = mapped_column(String(128), primary_key=True)  # '': none
    miss_cause: Mapped[str] = mapped_column(String(16), primary_key=True)  # '': none
    error_code: Mapped[str] = mapped_column(String(64), primary_key=True)  # '': the request succeeded


attach_trigger_ddl(RequestLogHourly.__table__)


class RequestLogTenantHourly(StatsSums, Base):
    """The stats sums per (tenant, UTC hour) only, plus the prefill cost model's two sums, kept by
    a trigger on request_log (gateway/db/tenant_hourly.py): what the overview reads."""

    __tablename__ = TENANT_HOURLY_TABLE

    tenant_id: Mapped[int] = mapped_column(Integer, primary_key=True)  # -1: no tenant
    hour: Mapped[datetime] = mapped_column(UtcDateTime, primary_key=True)
    prefill_ttft_ms: Mapped[float] = mapped_column(Float, default=0.0)
    prefill_tokens: Mapped[int] = mapped_column(BigInteger, default=0)


attach_trigger_ddl(RequestLogTenantHourly.__table__, tenant_hourly_trigger_sql)


class DoctorHourly(Base):
    """The doctor's loss sums per (tenant, UTC hour, order cause, cold cause), kept by a trigger on
    request_log (gateway/db/doctor_hourly.py, which also hooks the trigger's DDL to create_all)."""

    __tablename__ = "doctor_hourly"

    tenant_id: Mapped[int] = mapped_column(Integer, primary_key=True)  # -1: no tenant
    hour: Mapped[datetime] = mapped_column(UtcDateTime, primary_key=True)
    order_cause: Mapped[str] = mapped_column(String(32), primary_key=True)  # '': a canonicalized row
    cold_cause: Mapped[str] = mapped_column(String(32), primary_key=True)
    requests: Mapped[int] = mapped_column(BigInteger, default=0)
    prompt_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cached_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    uncached_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    raw_cached_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    canonical_cached_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    canonical_prompt_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    eviction: Mapped[int] = mapped_column(BigInteger, default=0)
    order: Mapped[int] = mapped_column(BigInteger, default=0)
    cold: Mapped[int] = mapped_column(BigInteger, default=0)
    shared: Mapped[int] = mapped_column(BigInteger, default=0)
    num_eviction: Mapped[int] = mapped_column(BigInteger, default=0)
    num_order: Mapped[int] = mapped_column(BigInteger, default=0)
    num_cold: Mapped[int] = mapped_column(BigInteger, default=0)
    num_shared: Mapped[int] = mapped_column(BigInteger, default=0)
    num_cold_beyond_shared: Mapped[int] = mapped_column(BigInteger, default=0)
