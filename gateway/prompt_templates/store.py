"""Tenants' own templates: every saved source is a new, immutable version (1, 2, 3, ...).

Functions take a session and never commit (the caller's session scope does). A template's
name is unique per tenant; two tenants may use the same name independently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import func, select

from gateway.db.models import Template, TemplateVersion

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


@dataclass(frozen=True)
class TemplateSummary:
    name: str
    num_versions: int
    latest_version: int


def find_template(session: Session, tenant_id: int, name: str) -> Template | None:
    return session.scalar(select(Template).where(Template.tenant_id == tenant_id, Template.name == name))


def save_version(session: Session, tenant_id: int, name: str, source: str) -> TemplateVersion:
    """Store `source` as the next version of the tenant's template `name` (created on first save)."""
    template = find_template(session, tenant_id, name)
    if template is None:
        template = Template(tenant_id=tenant_id, name=name)
        session.add(template)
        session.flush()
    latest = session.scalar(select(func.max(TemplateVersion.version)).where(TemplateVersion.template_id == template.id))
    version = TemplateVersion(template_id=template.id, version=(latest or 0) + 1, source=source)
    session.add(version)
    session.flush()
    return version


def get_version(session: Session, tenant_id: int, name: str, version: int | None = None) -> TemplateVersion | None:
    """Version `version` of the tenant's template (latest when None); None if absent."""
    query = (
        select(TemplateVersion)
        .join(Template, Template.id == TemplateVersion.template_id)
        .where(Template.tenant_id == tenant_id, Template.name == name)
    )
    if version is not None:
        return session.scalar(query.where(TemplateVersion.version == version))
    return session.scalar(query.order_by(TemplateVersion.version.desc()).limit(1))


def list_templates(session: Session, tenant_id: int) -> list[TemplateSummary]:
    """The tenant's templates by name, each with its version count and latest version."""
    rows = session.execute(
        select(
            Template.name,
            func.count(TemplateVersion.id),
            func.max(TemplateVersion.version),
        )
        .join(TemplateVersion, TemplateVersion.template_id == Template.id)
        .where(Template.tenant_id == tenant_id)
        .group_by(Template.name)
        .order_by(Template.name)
    )
    return [TemplateSummary(name, count, latest) for name, count, latest in rows]


def list_versions(session: Session, tenant_id: int, name: str) -> list[int]:
    """Version numbers of the tenant's template `name`, ascending (empty if it does not exist)."""
    return list(
        session.scalars(
            select(TemplateVersion.version)
            .join(Template, Template.id == TemplateVersion.template_id)
            .where(Template.tenant_id == tenant_id, Template.name == name)
            .order_by(TemplateVersion.version)
        )
    )
