"""Tenant templates: PUT saves a new version (every version kept), GET lists and reads them.

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
from gateway.prompt_templates import store as template_store

router = APIRouter(prefix="/v1/templates", tags=["templates"])

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"


class TemplatePut(BaseModel):
    source: str = Field(min_length=1, max_length=200_000)

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
    findings = check_source(gw.templates, name, body.source)
    saved = template_store.save_version(session, tenant.id, name, body.source)
    versions = template_store.list_versions(session, tenant.id, name)
    return TemplateOut(
        name=name, version=saved.version, source=saved.source, created_at=saved.created_at, versions=versions, lint=findings
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
    name: str, tenant: TenantDep, session: SessionDep, gw: StateDep, version: int | None = Query(default=None, ge=1)
) -> TemplateOut:
    """A version of the tenant's template (latest by default); a built-in when the tenant has none by that name."""
    saved = template_store.get_version(session, tenant.id, name, version)
    if saved is not None:
        versions = template_store.list_versions(session, tenant.id, name)
        return TemplateOut(name=name, version=saved.version, source=saved.source, created_at=saved.created_at, versions=versions)
    source = builtin_source(gw.templates, name) if version is None else None
    if source is None:
        suffix = f" version {version}" if version is not None else ""
        raise not_found(f"No template {name!r}{suffix}.", "name")
    return TemplateOut(name=name, version=None, is_builtin=True, source=source)

