"""POST /v1/canonicalize: preview what the gateway would send the engine, without generating.

Returns the canonical sections, their token counts, the static prefix length,
the template's lint findings and the rendered prompt.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter

from gateway.chat.service import load_tenant_template, resolve_model
from gateway.deps import StateDep, TenantDep
from gateway.chat.prepare import prepare_request
from gateway.chat.schemas import ChatCompletionRequest
from gateway.tenants.dynamic_rules import rules_for

router = APIRouter(tags=["canonicalize"])


class CanonicalizeRequest(ChatCompletionRequest):
    model: str = "default"


@router.post("/v1/canonicalize")
async def preview(body: CanonicalizeRequest, tenant: TenantDep, gw: StateDep) -> dict:
    """Canonicalize, render and tokenize the body exactly as /v1/chat/completions would."""
    body = body.model_copy(update={"canonicalize": True, "stream": False})
    return await asyncio.to_thread(build_preview, gw, tenant, body)


def build_preview(gw, tenant, body: CanonicalizeRequest) -> dict:
    """The preview for `tenant` (its own templates and dynamic rules)."""
    tenant_template = load_tenant_template(gw, tenant.id, body.template) if body.template else None
    engine = gw.engine
    prepared = prepare_request(
        body,
        templates=gw.templates,
        tokenizer=engine.tokenizer,
        model_id=resolve_model(gw, body.model),
        max_context=engine.max_context,
        default_max_tokens=gw.settings.default_max_tokens,
        tenant_template=tenant_template,
        rules=rules_for(tenant),
    )
    source = tenant_template.source if tenant_template else builtin_source(gw.templates, prepared.template_name)
    return {
        "object": "canonicalization",
        "model": prepared.prompt.model,
        "template": prepared.template_name,
        "template_version": prepared.template_version,
        "sections": prepared.sections.to_dict(),
        "signals": prepared.sections.signals.to_dict(),
        "hashes": prepared.sections.hashes(),
        "section_tokens": prepared.section_tokens,
        "num_tokens": prepared.num_prompt_tokens,
        "raw_num_tokens": len(prepared.raw_token_ids),
        "static_prefix_len": prepared.prompt.static_prefix_len,
        "lint": lint_findings(source),
        "rendered": prepared.prompt.text,
    }


def builtin_source(templates, name: str | None) -> str | None:
    if name is None:
        return None
    builtin = templates.get_builtin(name)
    return builtin if isinstance(builtin, str) else getattr(builtin, "source", None)


def lint_findings(source: str | None) -> list[dict]:
    if not source:
        return []
    from gateway.prompt_templates import lint_template

    return [
        {"severity": f.severity, "rule": f.rule, "message": f.message, "line": f.line} for f in lint_template(source)
    ]
