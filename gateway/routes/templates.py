"""Tenant templates: PUT saves a new version (every version kept), GET lists and reads them.

PUT may move a label to the new version in the same transaction (`"label": "production"`:
publish). GET shows the labels and the published version (what a bare name serves, see
prompt_templates/labels.py); `?version=` takes a number or a label.

A source that does not compile in the sandbox is a 400 and is not stored. A source that compiles
is stored even when the linter finds cache-breaking patterns; the findings come back with it.
"""

from __future__ import annotations

import re
from datetime import datetime

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field, model_validator

from gateway.canonicalize.surrogates import scrub_surrogates

from gateway.deps import SessionDep, StateDep, TenantDep
from gateway.errors import bad_request, not_found
from gateway.prompt_templates import labels
from gateway.prompt_templates import store as template_store

router = APIRouter(prefix="/v1/templates", tags=["templates"])

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"


class TemplatePut(BaseModel):
    source: str = Field(min_length=1, max_length=200_000)
    label: str | None = Field(default=None, description="Move this label (e.g. production) to the new version.")

    @model_validator(mode="before")
    @classmethod
    def _scrub_surrogates(cls, data):
        return scrub_surrogates(data)


class Finding(BaseModel):
    severity: str
    rule: str
    message: str
    line: int | None = None


class TemplateOut(BaseModel):
    object: str = "template"
    name: str
    version: int | None
    is_builtin: bool = False
    source: str
    created_at: datetime | None = None
    versions: list[int] = []
    labels: dict[str, int] = {}
    published_version: int | None = None
    lint: list[Finding] = []


def check_source(templates, name: str, source: str) -> list[Finding]:
    """Compile `source` in the sandbox (400 on failure) and return the linter's findings."""
    from gateway.prompt_templates import TemplateError, lint_template

    try:
        templates.compile(source, name)
    except TemplateError as exc:
        raise bad_request(str(exc), "source", "template_syntax_error") from exc
    return [Finding(severity=f.severity, rule=f.rule, message=f.message, line=f.line) for f in lint_template(source)]


def builtin_source(templates, name: str) -> str | None:
    """The source of built-in template `name`, or None when there is none."""
    try:
        builtin = templates.get_builtin(name)
    except KeyError:
        return None
    return builtin if isinstance(builtin, str) else getattr(builtin, "source", None)


@router.put("/{name}", status_code=201, response_model=TemplateOut)
def put_template(name: str, body: TemplatePut, tenant: TenantDep, session: SessionDep, gw: StateDep) -> TemplateOut:
    """Save `source` as the next version of the tenant's template `name`; returns it with lint findings."""
    if re.fullmatch(NAME_PATTERN, name) is None:
        raise bad_request(f"Template names match {NAME_PATTERN}.", "name")
    if body.label is not None and not labels.is_label(body.label):
        raise bad_request(f"Labels match {labels.LABEL_PATTERN}.", "label", "invalid_label")
    findings = check_source(gw.templates, name, body.source)
    saved = template_store.save_version(session, tenant.id, name, body.source)
    if body.label is not None:
        labels.set_label(session, tenant.id, name, body.label, saved.version)
    return saved_out(session, tenant.id, name, saved, findings)


def saved_out(session, tenant_id: int, name: str, saved, findings: list[Finding] | None = None) -> TemplateOut:
    published = labels.published_version(session, tenant_id, name)
    return TemplateOut(
        name=name, version=saved.version, source=saved.source, created_at=saved.created_at,
        versions=template_store.list_versions(session, tenant_id, name),
        labels=labels.list_labels(session, tenant_id, name),
        published_version=published.version if published else None, lint=findings or [],
    )


@router.get("")
def list_templates(tenant: TenantDep, session: SessionDep, gw: StateDep) -> dict:
    """The tenant's own templates (latest version, number of versions) and the built-ins."""
    own = [
        {"name": t.name, "is_builtin": False, "latest_version": t.latest_version, "num_versions": t.num_versions}
        for t in template_store.list_templates(session, tenant.id)
    ]
    builtins = [{"name": n, "is_builtin": True, "latest_version": None, "num_versions": 0} for n in gw.templates.names()]
    return {"object": "list", "data": own + builtins}


@router.get("/{name}", response_model=TemplateOut)
def get_template(
    name: str, tenant: TenantDep, session: SessionDep, gw: StateDep,
    version: str | None = Query(default=None, description="A version number or a label; default: the latest."),
) -> TemplateOut:
    """A version of the tenant's template (latest by default); a built-in when the tenant has none by that name."""
    if version is not None and not labels.is_version_number(version) and not labels.is_label(version):
        raise bad_request("`version` is a version number (1, 2, ...) or a label.", "version")
    if version is None:
        saved = template_store.get_version(session, tenant.id, name)
    else:
        saved = labels.resolve(session, tenant.id, f"{name}@{version}")
    if saved is not None:
        return saved_out(session, tenant.id, name, saved)
    source = builtin_source(gw.templates, name) if version is None else None
    if source is None:
        suffix = f" version {version}" if version is not None else ""
        raise not_found(f"No template {name!r}{suffix}.", "name")
    return TemplateOut(name=name, version=None, is_builtin=True, source=source)

