"""POST /v1/canonicalize: preview what the gateway would send the engine, without generating.

Returns the canonical sections, their token counts, the static prefix length (in tokens
and in whole KV pages: what a prefix cache can hold), the template's lint findings, the
rendered prompt and its segments in prompt order (section, text, tokens). `template` may
be a tenant template reference (`support`, `support@production`, `support@3`), a built-in
name, or an inline source (a draft: anything with a Jinja tag), which renders and is linted
without being stored.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from fastapi import APIRouter

from gateway.chat.parse import generation_request
from gateway.chat.schemas import ChatCompletionRequest
from gateway.deps import PreparerDep, ServedModelsDep, TenantDep
from gateway.errors import ApiError
from gateway.generation.canonical_render import render_sections

if TYPE_CHECKING:
    from gateway.db.models import Tenant
    from gateway.generation.preparer import Preparer
    from gateway.generation.served_models import ServedModels

router = APIRouter(tags=["canonicalize"])


class CanonicalizeRequest(ChatCompletionRequest):
    model: str = "default"


@router.post("/v1/canonicalize")
async def preview(body: CanonicalizeRequest, tenant: TenantDep, preparer: PreparerDep, models: ServedModelsDep) -> dict:
    """Canonicalize, render and tokenize the body exactly as /v1/chat/completions would."""
    body = body.model_copy(update={"canonicalize": True, "stream": False})
    return await asyncio.to_thread(build_preview, body, tenant=tenant, preparer=preparer, models=models)


def build_preview(body: CanonicalizeRequest, *, tenant: Tenant, preparer: Preparer, models: ServedModels) -> dict:
    """The preview for `tenant` (its own templates and dynamic rules)."""
    request = generation_request(body)
    tenant_template = preparer.load_template(tenant.id, body.template) if body.template else None
    try:
        prepared = preparer.prepare(request, tenant=tenant, model_id=models.resolve(body.model),
                                    tenant_template=tenant_template)
    except ApiError as exc:
        raise exc.name_field(request.names)
    if tenant_template is not None:
        source = tenant_template.source
    elif prepared.template_name == "inline":
        source = body.template
    else:
        source = builtin_source(preparer.templates, prepared.template_name)
    page_size = preparer.prompt_model.page_size
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
        "page_size": page_size,
        "static_prefix_pages": prepared.prompt.static_prefix_len // page_size,
        "segments": segments(preparer, prepared, body.template, tenant_template),
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


def segments(preparer: Preparer, prepared, name: str | None, tenant_template) -> list[dict]:
    """The rendered prompt's segments in order, each with its section and token count."""
    rendered = render_sections(preparer.templates, prepared.sections, preparer.prompt_model.tokenizer, name,
                               tenant_template)
    return [
        {"section": section, "text": str(text), "num_tokens": prepared.section_tokens.get(section, 0)}
        for section, text in rendered.segments
    ]
