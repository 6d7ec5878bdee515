"""Read-only queries over tenant templates for the dashboard's operator view: versions and their labels."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select

from gateway.db.models import Template, TemplateLabel, TemplateVersion

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


def list_template_versions(session: Session, tenant_id: int) -> list[dict]:
    """One row per version of the tenant's templates (name, version ascending): created_at and the
    labels pointing at it (comma-separated, "" when none)."""
    labelled: dict[tuple[int, int], list[str]] = {}
    label_rows = session.execute(
        select(TemplateLabel.template_id, TemplateLabel.version, TemplateLabel.label)
        .join(Template, Template.id == TemplateLabel.template_id)
        .where(Template.tenant_id == tenant_id)
        .order_by(TemplateLabel.label)
    )
    for template_id, version, label in label_rows:
        labelled.setdefault((template_id, version), []).append(label)
    rows = session.execute(
        select(Template.id, Template.name, TemplateVersion.version, TemplateVersion.created_at)
        .join(TemplateVersion, TemplateVersion.template_id == Template.id)
        .where(Template.tenant_id == tenant_id)
        .order_by(Template.name, TemplateVersion.version)
    )
    return [
        {"template": name, "version": version, "created_at": created_at,
         "labels": ", ".join(labelled.get((template_id, version), []))}
        for template_id, name, version, created_at in rows
    ]
