"""The template studio's service: diffs between versions or a draft, and the what-if estimate.

Functions take a session and never commit; the estimate prepares requests with the gateway's
own Preparer (gateway/generation/preparer.py), so what it replays is what a request would send.
Samples are stored in chat completions' body shape (GenerationRequest.sample_body), so the replay
reads them back with that wire format's parser.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from gateway.chat.parse import generation_request
from gateway.chat.schemas import ChatCompletionRequest
from gateway.generation.prepare import TenantTemplate
from gateway.insight.what_if import replay
from gateway.prompt_templates import labels

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from gateway.db.models import Tenant, TemplateVersion
    from gateway.generation.preparer import Preparer
    from gateway.generation.served_models import ServedModels
    from gateway.prompt_templates.samples import Sample

DRAFT = "draft"


def unified_diff(old: str, new: str, old_name: str, new_name: str) -> dict:
    """A unified diff of two sources and its added / removed line counts."""
    lines = list(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), old_name, new_name))
    body = [line for line in lines if not line.startswith(("---", "+++"))]
    return {
        "diff": "".join(line if line.endswith("\n") else line + "\n" for line in lines),
        "num_added": sum(1 for line in body if line.startswith("+")),
        "num_removed": sum(1 for line in body if line.startswith("-")),
    }


def resolve_base(session: Session, tenant_id: int, name: str, base: str | None) -> TemplateVersion | None:
    """The version `base` names (a label or a number; default: the published version)."""
    return labels.resolve(session, tenant_id, name if base is None else f"{name}@{base}")


def estimate(
    tenant: Tenant, name: str, draft: str, base: TemplateVersion | None, recent: list[Sample], *, preparer: Preparer,
    models: ServedModels, max_tokens: int,
) -> dict:
    """Replay `recent` through the draft and the base version (what_if.py); ApiError 400 if the draft fails.
    `max_tokens` bounds each variant's oracle (the canonical shadow's bound)."""
    variants = {DRAFT: TenantTemplate(name, 0, draft)}
    if base is not None:
        variants["current"] = TenantTemplate(name, base.version, base.source)
    page_size = preparer.prompt_model.page_size
    result = {}
    for key, template in variants.items():
        estimate_of = replay(
            recent, lambda sample, t=template: prepare_sample(preparer, models, tenant, sample, t), page_size=page_size,
            max_tokens=max_tokens, template_version=template.version or None,
        )
        result[key] = estimate_of.to_dict()
    result.setdefault("current", None)
    return result


def prepare_sample(preparer: Preparer, models: ServedModels, tenant: Tenant, sample: Sample, template: TenantTemplate
                   ) -> tuple[list[int], int]:
    """The prompt token ids and static prefix length `sample` gets under `template`."""
    body = ChatCompletionRequest.model_validate(
        {"model": "default", **sample.body, "template": template.name, "stream": False}
    )
    request = generation_request(body.model_copy(update={"canonicalize": True}))
    prepared = preparer.prepare(request, tenant=tenant, model_id=models.resolve(body.model), tenant_template=template,
                                received_at=sample.created_at)
    return list(prepared.prompt.token_ids), prepared.prompt.static_prefix_len
