"""Request preparation, top-down: canonicalize -> render -> tokenize (+ the raw order for the shadow index).

`prepare_request` turns a validated chat body into a `PreparedRequest`: the
token ids the backend will prefill, the generation parameters, the cache
namespace, and what the request log needs (section hashes, signals, template).
It is pure CPU work on its inputs (no engine, no database), so the chat
service runs it in a worker thread.

`prepare_for_tenant` gathers those inputs for one tenant on this gateway (the
template registry, the model's tokenizer and context length (`gw.prompt_model`: the embedded
engine's, or on an edge the remotes' model files), the
tenant's dynamic rules and, loaded by the caller with `load_tenant_template`,
its own template version). Chat completions and the /v1/canonicalize preview
both prepare through it, so a preview is exactly what a chat would send.

Invariant: with `canonicalize=true` the prompt is the template's rendering of
the canonical sections, tokenized section by section, so every request with
the same static sections shares the first `static_prefix_len` token ids. With
`canonicalize=false` the prompt is the client's own order rendered by the
model's chat template (`render_raw`), and static_prefix_len is 0; its canonical
rendering is then made only for the canonical shadow (`render_canonical`, on the shadow's
worker, never on the request path).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from gateway.canonicalize import canonicalize, render_raw, tokenize_segments
from gateway.chat.output_spec import OutputSpec, build_output_spec
from gateway.chat.request_limits import check_request_limits
from gateway.chat.schemas import ChatCompletionRequest
from gateway.errors import ApiError, bad_request
from gateway.insight.counterfactual import CanonicalPrompt
from gateway.routing.base import GenerationParams, PreparedPrompt
from gateway.tenants.dynamic_rules import rules_for

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from gateway.canonicalize import DynamicRules, Sections
    from gateway.db.models import Tenant
    from gateway.state import GatewayState


@dataclass(frozen=True)
class TenantTemplate:
    """A tenant's own template version, loaded from the database by the caller."""

    name: str
    version: int
    source: str


@dataclass(frozen=True)
class PreparedRequest:
    prompt: PreparedPrompt
    params: GenerationParams
    sections: Sections
    raw_token_ids: tuple[int, ...]
    section_tokens: dict[str, int]
    template_name: str | None
    template_version: int | None
    is_canonicalized: bool
    canonical: CanonicalPrompt | None = None  # the served prompt when canonicalized, else None

    @property
    def num_prompt_tokens(self) -> int:
        return self.prompt.num_tokens


def load_tenant_template(session_factory: sessionmaker[Session], tenant_id: int, ref: str) -> TenantTemplate | None:
    """The version of the tenant's own template that `ref` names (`name`, `name@label`, `name@N`;
    see prompt_templates/labels.py), or None. Reads the database."""
    from gateway.prompt_templates import labels

    with session_factory() as session:
        row = labels.resolve(session, tenant_id, ref)
        name = labels.split_ref(ref)[0]
        return TenantTemplate(name=name, version=row.version, source=row.source) if row else None


def prepare_for_tenant(
    gw: GatewayState, tenant: Tenant, body: ChatCompletionRequest, model_id: str, tenant_template: TenantTemplate | None,
    received_at: datetime | None = None,
) -> PreparedRequest:
    """`prepare_request` with this gateway's templates and embedded engine (its tokenizer behind the
    gateway's shared EncodeCache), and the tenant's dynamic rules, after the body's limits
    (request_limits.py) are checked."""
    check_request_limits(body, gw.settings.limits)
    model = gw.prompt_model
    prepared = prepare_request(
        body,
        templates=gw.templates,
        tokenizer=gw.encode_cache or model.tokenizer,
        model_id=model_id,
        max_context=model.max_context,
        default_max_tokens=gw.settings.default_max_tokens,
        tenant_template=tenant_template,
        rules=rules_for(tenant),
        received_at=received_at,
    )
    if prepared.params.grammar is not None and gw.engine is not None:  # remotes enforce their own
        gw.engine.compile_grammar(prepared.params.grammar)  # here, in the worker thread; GrammarError -> 400
    weight = gw.settings.engine.tenant_weights.get(tenant.name, 1.0)
    params = replace(prepared.params, tenant=f"tenant-{tenant.id}", tenant_weight=weight,
                     queue_timeout_s=body.queue_timeout_s)
    return replace(prepared, params=params)


# OpenAI fields radixgate does not implement, with the values that mean "not used" (sent by some clients)
UNSUPPORTED_FIELDS = {
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "logit_bias": (None, {}),
    "frequency_penalty": (None, 0, 0.0),
    "presence_penalty": (None, 0, 0.0),
    "functions": (None, []),
    "function_call": (None,),
    "audio": (None,),
    "modalities": (None, ["text"]),
    "prediction": (None,),
    "web_search_options": (None,),
}


def validate_request(body: ChatCompletionRequest) -> None:
    """Reject what we cannot serve, with OpenAI-style 400s naming the field, before any work is done."""
    if body.n is not None and body.n > 1:
        raise bad_request("n > 1 is not supported: radixgate returns exactly one choice per request.", "n", "unsupported_n")
    extra = body.model_extra or {}
    for name, unused in UNSUPPORTED_FIELDS.items():
        if name in extra and extra[name] not in unused:
            raise bad_request(f"{name!r} is not supported by this server; leave it out.", name, "unsupported_parameter")


def output_spec(body: ChatCompletionRequest) -> OutputSpec:
    """The body's structured-output and tool-forcing fields as one OutputSpec (gateway/chat/output_spec.py)."""
    return build_output_spec(response_format=body.response_format, tools=body.tools, tool_choice=body.tool_choice,
                             parallel_tool_calls=body.parallel_tool_calls)


def generation_params(body: ChatCompletionRequest, default_max_tokens: int, spec: OutputSpec | None = None) -> GenerationParams:
    max_tokens = body.max_completion_tokens or body.max_tokens or default_max_tokens
    return GenerationParams(
        max_tokens=max_tokens,
        temperature=1.0 if body.temperature is None else body.temperature,
        top_p=1.0 if body.top_p is None else body.top_p,
        seed=body.seed,
        stop=tuple(body.stop_list()),
        tools=tuple(body.tools or ()),
        tool_choice=body.tool_choice,
        user=body.user,
        response_format=body.response_format,
        parallel_tool_calls=body.parallel_tool_calls,
        grammar=spec.grammar if spec else None,
    )


def prepare_request(
    body: ChatCompletionRequest,
    *,
    templates: Any,
    tokenizer: Any,
    model_id: str,
    max_context: int,
    default_max_tokens: int,
    tenant_template: TenantTemplate | None = None,
    rules: DynamicRules | None = None,
    received_at: datetime | None = None,
) -> PreparedRequest:
    """Canonicalize (with the tenant's dynamic `rules`; None: the defaults), render and tokenize one request.
    `received_at` (default: now) is what a template's `now` renders; the what-if passes a sample's time.

    Raises ApiError (400) for bad templates or long prompts.
    """
    validate_request(body)
    spec = output_spec(body)
    raw_body = body.body_dict()
    try:
        sections = canonicalize(raw_body, rules)
        sections.received_at = (received_at or datetime.now(timezone.utc)).isoformat()
        raw_ids = tuple(render_raw(tokenizer, raw_body))
    except ValueError as exc:  # malformed context, tools or messages the schema let through
        raise bad_request(f"Malformed request body: {exc}", None, "invalid_request_body") from exc
    canonical = None
    if body.canonicalize:
        rendered = render_sections(templates, sections, tokenizer, body.template, tenant_template)
        tokenized = tokenize_segments(tokenizer, rendered.segments)
        token_ids = tuple(tokenized.token_ids)
        text = "".join(segment_text for _, segment_text in rendered.segments)
        prefix_len, section_tokens = tokenized.static_prefix_len, dict(tokenized.section_tokens)
        template_name = rendered.template_name
        version = tenant_template.version if tenant_template else getattr(rendered, "version", None)
        messages = canonical_messages(sections)
        canonical = canonical_prompt(rendered, tokenized)
    else:
        token_ids, text, prefix_len, section_tokens = raw_ids, tokenizer.decode(list(raw_ids)), 0, {}
        template_name, version = None, None
        messages = tuple(m for m in raw_body["messages"])
    params = generation_params(body, default_max_tokens, spec)
    forced = spec.assistant_prefix
    if forced:
        token_ids += tuple(tokenizer.encode(forced, add_special_tokens=False, split_special_tokens=True))
        text += forced
    check_length(len(token_ids), max_context)
    params = clamp_max_tokens(params, len(token_ids), max_context)
    system_len = canonical.system_prefix_len if canonical is not None else 0
    prompt = PreparedPrompt(token_ids, text, messages, prefix_len, model_id, assistant_prefix=forced,
                            system_prefix_len=system_len)
    return PreparedRequest(
        prompt, params, sections, raw_ids, section_tokens, template_name, version, body.canonicalize, canonical
    )


def render_canonical(
    templates: Any, sections: Sections, tokenizer: Any, name: str | None, tenant_template: TenantTemplate | None
) -> CanonicalPrompt:
    """The canonical rendering of `sections`, exactly as `prepare_request` would serve it with
    canonicalize=true (the forced tool-call prefix aside). Raises ApiError as render_sections."""
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


def render_sections(templates: Any, sections: Sections, tokenizer: Any, name: str | None, tenant_template: TenantTemplate | None):
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


def check_length(num_prompt_tokens: int, max_context: int) -> None:
    if num_prompt_tokens >= max_context:
        raise ApiError(
            400,
            f"This model's maximum context length is {max_context} tokens; the prompt has {num_prompt_tokens}.",
            "invalid_request_error",
            "context_length_exceeded",
            "messages",
        )


def clamp_max_tokens(params: GenerationParams, num_prompt_tokens: int, max_context: int) -> GenerationParams:
    """Never ask for more tokens than the context has room for."""
    room = max_context - num_prompt_tokens
    if params.max_tokens <= room:
        return params
    return replace(params, max_tokens=room)


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
