"""The canonical rendering of a request's sections: template -> segments -> section-stable token ids.

`render_sections` picks the template (the tenant's own version, a named built-in, or the built-in
the sections call for); `render_canonical` is exactly what `prepare_request` serves with
canonicalize=true (the forced tool-call prefix aside), so the canonical shadow and the preview
see the served prompt; `canonical_messages` is the same order as chat messages, for remote
backends that apply their own chat template.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.canonicalize import tokenize_segments
from gateway.errors import bad_request
from gateway.insight.counterfactual import CanonicalPrompt

if TYPE_CHECKING:
    from gateway.canonicalize import Sections
    from gateway.generation.prepare import TenantTemplate


def render_canonical(
    templates: Any, sections: Sections, tokenizer: Any, name: str | None, tenant_template: TenantTemplate | None
) -> CanonicalPrompt:
    """The canonical rendering of `sections`. Raises ApiError as render_sections."""
    rendered = render_sections(templates, sections, tokenizer, name, tenant_template)
    return canonical_prompt(rendered, tokenize_segments(tokenizer, rendered.segments))


def canonical_prompt(rendered, tokenized) -> CanonicalPrompt:
    """Token ids and static lengths; the system prefix is the leading run of system/tools segments."""
    system_len, counts = 0, dict(tokenized.section_tokens)
    for name, _ in rendered.segments:
        if name not in ("system", "tools"):
            break
        system_len += counts.pop(name, 0)
    system_len = min(system_len, tokenized.static_prefix_len)
    return CanonicalPrompt(tuple(tokenized.token_ids), tokenized.static_prefix_len, system_len)


def render_sections(templates: Any, sections: Sections, tokenizer: Any, name: str | None,
                    tenant_template: TenantTemplate | None):
    """Render with the tenant's template, a named built-in, or the built-in the sections call for."""
    from gateway.prompt_templates import TemplateError, TemplateNotFound

    try:
        if tenant_template is not None:
            return templates.render(tenant_template.name, sections, tokenizer=tokenizer, tenant_source=tenant_template.source)
        return templates.render(name or templates.choose_builtin(sections), sections, tokenizer=tokenizer)
    except TemplateNotFound as exc:
        raise bad_request(f"Unknown template {name!r}.", "template", "template_not_found") from exc
    except TemplateError as exc:
        raise bad_request(f"Template {name!r} failed to render: {exc}", "template", "template_error") from exc


def canonical_messages(sections: Sections) -> tuple[dict, ...]:
    """The canonical sections as chat messages, for remote backends that apply their own chat template.

    [system (+ context documents)] + history + [user: dynamic lines, then the question].
    Tools travel separately in GenerationParams.
    """
    system_parts = [sections.system] if sections.system else []
    if sections.context:
        docs = "\n".join(f'<document id="{doc.id}">\n{doc.text}\n</document>' for doc in sections.context)
        system_parts.append(f"<context>\n{docs}\n</context>")
    messages: list[dict] = [{"role": "system", "content": "\n\n".join(system_parts)}] if system_parts else []
    messages.extend(sections.history)
    question = sections.question if isinstance(sections.question, str) else str(sections.question.get("content", ""))
    user_text = "\n".join([*sections.dynamic, question]) if sections.dynamic else question
    messages.append({"role": "user", "content": user_text})
    return tuple(messages)
