"""Request preparation, top-down: canonicalize -> render -> tokenize (+ the raw order for the shadow index).

`prepare_request` turns a GenerationRequest into a `PreparedRequest`: the token ids the
backend will prefill, the generation parameters, and what the request log needs (section
hashes, signals, template). It is pure CPU work on its inputs (no engine, no database), so the
request path runs it in a worker thread; `Preparer` (preparer.py) gathers those inputs for one
tenant on this gateway.

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
from gateway.errors import bad_request, field_error
from gateway.generation.canonical_render import canonical_messages, canonical_prompt, render_sections
from gateway.generation.output_spec import OutputSpec, build_output_spec
from gateway.insight.counterfactual import CanonicalPrompt
from gateway.routing.backend import GenerationParams, PreparedPrompt

if TYPE_CHECKING:
    from gateway.canonicalize import DynamicRules, Sections
    from gateway.generation.request import GenerationRequest


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
    cache_pins: tuple = ()  # the request's cache breakpoints as pins (gateway/pins/breakpoints.py BreakpointPin)

    @property
    def num_prompt_tokens(self) -> int:
        return self.prompt.num_tokens


def output_spec(request: GenerationRequest) -> OutputSpec:
    """The request's output constraint and tool fields as one OutputSpec (output_spec.py)."""
    return build_output_spec(output=request.output, tools=request.tools, tool_choice=request.tool_choice,
                             parallel_tool_calls=request.parallel_tool_calls)


def generation_params(request: GenerationRequest, default_max_tokens: int, spec: OutputSpec | None = None) -> GenerationParams:
    sampling = request.sampling
    return GenerationParams(
        max_tokens=sampling.max_tokens or default_max_tokens,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        top_k=sampling.top_k,
        seed=sampling.seed,
        stop=sampling.stop,
        tools=request.tools,
        tool_choice=request.tool_choice,
        user=request.user,
        output=request.output,
        parallel_tool_calls=request.parallel_tool_calls,
        grammar=spec.grammar if spec else None,
        queue_timeout_s=request.queue_timeout_s,
    )


def prepare_request(
    request: GenerationRequest,
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
    spec = output_spec(request)
    conversation = request.canonical_input()
    try:
        sections = canonicalize(conversation, rules)
        sections.received_at = (received_at or datetime.now(timezone.utc)).isoformat()
        raw_ids = tuple(render_raw(tokenizer, conversation))
    except ValueError as exc:  # malformed context, tools or messages the schema let through
        raise bad_request(f"Malformed request body: {exc}", None, "invalid_request_body") from exc
    canonical = None
    if request.canonicalize:
        rendered = render_sections(templates, sections, tokenizer, request.template, tenant_template)
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
        messages = tuple(conversation["messages"])
    params = generation_params(request, default_max_tokens, spec)
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
        prompt, params, sections, raw_ids, section_tokens, template_name, version, request.canonicalize, canonical
    )


def check_length(num_prompt_tokens: int, max_context: int) -> None:
    if num_prompt_tokens >= max_context:
        raise field_error(("messages",), lambda _: f"This model's maximum context length is {max_context} tokens; "
                          f"the prompt has {num_prompt_tokens}.", "context_length_exceeded")


def clamp_max_tokens(params: GenerationParams, num_prompt_tokens: int, max_context: int) -> GenerationParams:
    """Never ask for more tokens than the context has room for."""
    room = max_context - num_prompt_tokens
    if params.max_tokens <= room:
        return params
    return replace(params, max_tokens=room)
