"""Tenant templates: each name's versions, its labels (a name for one version), and sampled request bodies."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from gateway.db.models.base import Base, UtcDateTime, utc_now


class Template(Base):
    __tablename__ = "templates"
    __table_args__ = (UniqueConstraint("tenant_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)


class TemplateVersion(Base):
    """One immutable version of a tenant template; versions count up from 1 per template."""

    __tablename__ = "template_versions"
    __table_args__ = (UniqueConstraint("template_id", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    template_id: Mapped[int] = mapped_column(ForeignKey("templates.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)


class TemplateLabel(Base):
    """A movable name (`production`, `staging`) for one version of a tenant template; unique per template.

    A request names it as `template: "support@production"`; moving it back is a rollback."""

    __tablename__ = "template_labels"
    __table_args__ = (UniqueConstraint("template_id", "label"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    template_id: Mapped[int] = mapped_column(ForeignKey("templates.id", ondelete="CASCADE"))
    label: Mapped[str] = mapped_column(String(64))
    version: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)


class TemplateSample(Base):
    """One recent request body that named a tenant template, kept for the studio's preview and what-if.

    Bounded per (tenant, template): the oldest rows go when a new one is recorded past the limit;
    recording is opt-out (RADIXGATE_TEMPLATE_SAMPLE_SIZE=0, or DELETE .../samples)."""

    __tablename__ = "template_samples"
    __table_args__ = (Index("ix_template_samples_tenant_template", "tenant_id", "template", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    template: Mapped[str] = mapped_column(String(128))
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
