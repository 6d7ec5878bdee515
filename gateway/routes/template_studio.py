"""The template studio's API (the dashboard's Templates page is one client of it), tenant scoped:

    GET    /v1/templates/{name}/labels                 label -> version
    PUT    /v1/templates/{name}/labels/{label}         {"version": N}: create or move (rollback = move back)
    DELETE /v1/templates/{name}/labels/{label}
    POST   /v1/templates/{name}/diff                   {"source"|"version", "base"}: unified diff
    POST   /v1/templates/{name}/estimate               {"source", "base", "max_requests"}: the what-if
    GET    /v1/templates/{name}/samples                the bounded sample of recent request bodies
    DELETE /v1/templates/{name}/samples                drop them (recording is opt-out)

`base` is a label or a version number; by default the published version (labels.py). Every
name is looked up in the caller's own templates only: another tenant's template is a 404.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from gateway.deps import SessionDep, StateDep, TenantDep
from gateway.errors import bad_request, not_found
from gateway.prompt_templates import labels, samples
from gateway.prompt_templates import store as template_store
from gateway.routes.templates import check_source
from gateway.studio import service as studio

if TYPE_CHECKING:
    from gateway.state import GatewayState

router = APIRouter(prefix="/v1/templates", tags=["templates"])
MAX_VERSION = 2**31 - 1


class LabelPut(BaseModel):
    version: int = Field(ge=1, le=MAX_VERSION)


class DiffRequest(BaseModel):
    source: str | None = Field(default=None, min_length=1, max_length=200_000)
    version: int | None = Field(default=None, ge=1, le=MAX_VERSION)
    base: str | None = None


class EstimateRequest(BaseModel):
    source: str = Field(min_length=1, max_length=200_000)
    base: str | None = None
    max_requests: int | None = Field(default=None, ge=1)


def require_template(session, tenant_id: int, name: str) -> None:
    if not template_store.list_versions(session, tenant_id, name):
        raise not_found(f"No template {name!r}.", "name")


def require_base(session, tenant_id: int, name: str, base: str | None):
    found = studio.resolve_base(session, tenant_id, name, base)
    if found is None and base is not None:
        raise not_found(f"Template {name!r} has no version or label {base!r}.", "base")
    return found


@router.get("/{name}/labels")
def list_labels(name: str, tenant: TenantDep, session: SessionDep) -> dict:
    require_template(session, tenant.id, name)
    return {"object": "template.labels", "name": name, "labels": labels.list_labels(session, tenant.id, name)}


@router.put("/{name}/labels/{label}")
def put_label(name: str, label: str, body: LabelPut, tenant: TenantDep, session: SessionDep) -> dict:
    """Point `label` at `version`; requests naming `name@label` are served that version from now on."""
    if not labels.is_label(label):
        raise bad_request(f"Labels match {labels.LABEL_PATTERN}.", "label", "invalid_label")
    try:
        labels.set_label(session, tenant.id, name, label, body.version)
    except LookupError as exc:
        raise not_found(str(exc), "version") from exc
    return {"object": "template.labels", "name": name, "labels": labels.list_labels(session, tenant.id, name)}


@router.delete("/{name}/labels/{label}")
def delete_label(name: str, label: str, tenant: TenantDep, session: SessionDep) -> dict:
    if not labels.delete_label(session, tenant.id, name, label):
        raise not_found(f"Template {name!r} has no label {label!r}.", "label")
    return {"object": "template.labels", "name": name, "labels": labels.list_labels(session, tenant.id, name)}


@router.post("/{name}/diff")
def diff(name: str, body: DiffRequest, tenant: TenantDep, session: SessionDep) -> dict:
    """The draft `source` (or `version`) against `base` (default: the published version)."""
    require_template(session, tenant.id, name)
    base = require_base(session, tenant.id, name, body.base)
    if (body.source is None) == (body.version is None):
        raise bad_request("Send exactly one of `source` (a draft) and `version`.", "source")
    if body.version is not None:
        other = template_store.get_version(session, tenant.id, name, body.version)
        if other is None:
            raise not_found(f"No template {name!r} version {body.version}.", "version")
        new, new_name = other.source, f"{name} v{other.version}"
    else:
        new, new_name = body.source, f"{name} draft"
    old, old_name = (base.source, f"{name} v{base.version}") if base else ("", f"{name} (none)")
    return {"object": "template.diff", "name": name, "base_version": base.version if base else None,
            **studio.unified_diff(old, new, old_name, new_name)}


@router.post("/{name}/estimate")
async def estimate(name: str, body: EstimateRequest, tenant: TenantDep, session: SessionDep, gw: StateDep) -> dict:
    """Replay the tenant's recent sampled requests through the draft and the base version (no model run)."""
    if gw.prompt_model is None:
        raise bad_request("The estimate needs the model's tokenizer; this gateway has neither an engine nor remotes.")
    findings = check_source(gw.templates, name, body.source)
    base = require_base(session, tenant.id, name, body.base)
    limit = min(body.max_requests or gw.settings.what_if_max_requests, gw.settings.what_if_max_requests)
    await asyncio.to_thread(flush_side_writes, gw)
    recent = samples.list_samples(session, tenant.id, name, limit)
    figures = await asyncio.to_thread(
        studio.estimate, tenant, name, body.source, base, recent, preparer=gw.path.preparer, models=gw.path.models,
        max_tokens=gw.settings.canonical_shadow_max_tokens_per_tenant)
    return {"object": "template.estimate", "name": name, "num_requests": len(recent),
            "base_version": base.version if base else None, **figures, "lint": [f.model_dump() for f in findings]}


def flush_side_writes(gw: GatewayState) -> None:
    """Samples the chat path queued (gateway/db/side_writer.py) land before a route reads or deletes them."""
    if gw.side_writer is not None:
        gw.side_writer.flush()


@router.get("/{name}/samples")
def list_samples(name: str, tenant: TenantDep, session: SessionDep, gw: StateDep,
                 limit: int = Query(default=20, ge=1, le=1000)) -> dict:
    flush_side_writes(gw)
    data = [{"id": s.id, "created_at": s.created_at, "body": s.body}
            for s in samples.list_samples(session, tenant.id, name, limit)]
    return {"object": "list", "data": data}


@router.delete("/{name}/samples")
def delete_samples(name: str, tenant: TenantDep, session: SessionDep, gw: StateDep) -> dict:
    flush_side_writes(gw)
    return {"object": "template.samples", "name": name, "deleted": samples.delete_samples(session, tenant.id, name)}
