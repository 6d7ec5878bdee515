"""Template labels and references: `support`, `support@production`, `support@3`.

A label is a movable name for one version of a tenant template (unique per template).
A reference resolves to a version:
  name@label    the version the label points at
  name@N        version N
  name          the version labelled DEFAULT_LABEL when that label exists, else the latest
so publishing a version without moving `production` does not change what a bare name serves
once `production` exists, and moving the label back is a rollback. Template names cannot
contain "@" (routes/templates.NAME_PATTERN), so the split is unambiguous.

Functions take a session and never commit.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sqlalchemy import select

from gateway.db.models import TemplateLabel, TemplateVersion, utc_now
from gateway.prompt_templates import store

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

DEFAULT_LABEL = "production"
LABEL_PATTERN = r"^[A-Za-z][A-Za-z0-9._-]{0,63}$"


def split_ref(ref: str) -> tuple[str, str | None]:
    """(name, label or version text) of a reference; the part after "@" is None when absent."""
    name, sep, tail = ref.partition("@")
    return name, (tail if sep else None)


def is_version_number(text: str) -> bool:
    """ASCII digits of a positive version that fits a database integer."""
    return text.isascii() and text.isdigit() and 0 < len(text) <= 9 and int(text) >= 1


def is_label(text: str) -> bool:
    return re.fullmatch(LABEL_PATTERN, text) is not None


def list_labels(session: Session, tenant_id: int, name: str) -> dict[str, int]:
    """Label -> version for the tenant's template `name` (empty when it has none)."""
    template = store.find_template(session, tenant_id, name)
    if template is None:
        return {}
    rows = session.execute(
        select(TemplateLabel.label, TemplateLabel.version)
        .where(TemplateLabel.template_id == template.id)
        .order_by(TemplateLabel.label)
    )
    return {label: version for label, version in rows}


def set_label(session: Session, tenant_id: int, name: str, label: str, version: int) -> TemplateLabel:
    """Point `label` at `version` (created or moved). LookupError when that version does not exist."""
    if store.get_version(session, tenant_id, name, version) is None:
        raise LookupError(f"No template {name!r} version {version}.")
    template = store.find_template(session, tenant_id, name)
    row = session.scalar(
        select(TemplateLabel).where(TemplateLabel.template_id == template.id, TemplateLabel.label == label)
    )
    if row is None:
        row = TemplateLabel(template_id=template.id, label=label, version=version)
        session.add(row)
    row.version, row.updated_at = version, utc_now()
    session.flush()
    return row


def delete_label(session: Session, tenant_id: int, name: str, label: str) -> bool:
    """Remove `label`; False when there was none."""
    template = store.find_template(session, tenant_id, name)
    if template is None:
        return False
    row = session.scalar(
        select(TemplateLabel).where(TemplateLabel.template_id == template.id, TemplateLabel.label == label)
    )
    if row is None:
        return False
    session.delete(row)
    session.flush()
    return True


def resolve(session: Session, tenant_id: int, ref: str) -> TemplateVersion | None:
    """The version a reference names (module docstring), or None when there is no such version or label."""
    name, tail = split_ref(ref)
    if tail is None:
        version = list_labels(session, tenant_id, name).get(DEFAULT_LABEL)
    elif is_version_number(tail):
        version = int(tail)
    else:
        version = list_labels(session, tenant_id, name).get(tail)
        if version is None:
            return None
    return store.get_version(session, tenant_id, name, version)


def published_version(session: Session, tenant_id: int, name: str) -> TemplateVersion | None:
    """What a bare `name` serves: the DEFAULT_LABEL version, else the latest."""
    return resolve(session, tenant_id, name)
