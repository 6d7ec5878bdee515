"""Cache breakpoints (Anthropic's `cache_control`) as timed pins: where each one falls in the prompt the
request serves, what the engine is asked to hold, and the cache-write figures of the usage.

    pins = breakpoint_pins(request, prepared, templates=..., tokenizer=..., tenant_template=..., rules=...,
                           page_size=16, ttl_scale=1.0)            # Preparer.prepare, worker thread
    write, write_1h = cache_write_figures(pins, cached_tokens)       # GenerationRun.api_usage

Where a breakpoint falls. A breakpoint after `messages[:n]` (CacheBreakpoint) marks the tools, the
system and those messages. Canonicalization may move content ([system, tools, context, history,
dynamic, question]), so the marked content need not be one run of the served prompt. The rule: the
breakpoint pins the longest prefix of the served token ids that holds only content at or before the
breakpoint. It is computed, not assumed: the request cut after its breakpoint (messages[:n], with
the same tools, context, template and dynamic rules, the marked messages in the roles they have in
the whole request) is rendered and tokenized exactly as the request was, and the breakpoint's
position is the length of the common token prefix of the two. Canonical segments are tokenized
one by one, so equal sections give equal ids, and a history cut after a message shares the ids of
the messages before it; where canonicalization put unmarked content (a later system message, a
later message's documents) before marked content (a hoisted date, the rest of the history), the
common prefix stops there. A raw-order request (canonicalize=false) compares its own chat-template
rendering with the cut one's the same way. The position is then rounded down to the KV page the
radix cache stores (a breakpoint inside the first page pins nothing).

Bounds. The engine leases each position for its TTL (5 minutes or 1 hour, times `ttl_scale`, a
setting that tests and benches shorten), refreshed by every request whose prompt runs through it.
The leases count against the caller's pin quota: its tenant's `pin_quota_tokens` (a cache group's:
the sum of its tenants' quotas, the same bound stored pins have), shared by its salted namespaces,
and against the engine's cap on pinned pages (`max_pinned_fraction`). Past either, the request is
served and its prefix cached as any other (the engine logs it): never an error.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.canonicalize import canonicalize, render_raw, tokenize_segments

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from gateway.canonicalize import DynamicRules
    from gateway.db.models import Tenant
    from gateway.generation.prepare import PreparedRequest, TenantTemplate
    from gateway.generation.request import GenerationRequest

log = logging.getLogger(__name__)

LONG_TTL_S = 3600.0  # Anthropic's "1h"; shorter TTLs are its default "5m"
SENTINEL = {"role": "assistant", "content": ""}  # keeps a cut conversation's last user turn in the history


@dataclass(frozen=True)
class BreakpointPin:
    """One breakpoint as the engine holds it: the served prompt's first `num_tokens` (a whole number of
    pages) for `ttl_s` seconds (scaled); `is_long`: a 1h breakpoint (Anthropic's ephemeral_1h)."""

    num_tokens: int
    ttl_s: float
    is_long: bool


def breakpoint_pins(request: GenerationRequest, prepared: PreparedRequest, *, templates: Any, tokenizer: Any,
                    tenant_template: TenantTemplate | None, rules: DynamicRules | None, page_size: int,
                    ttl_scale: float = 1.0) -> tuple[BreakpointPin, ...]:
    """The request's breakpoints as pins, in prompt order (module docstring: where each one falls).
    A breakpoint that falls inside the first page is left out."""
    served = prepared.prompt.token_ids
    positions: dict[int, int] = {}
    pins = []
    for mark in request.cache_breakpoints:
        if mark.messages not in positions:
            try:
                cut = cut_token_ids(request, prepared, mark.messages, templates=templates, tokenizer=tokenizer,
                                    tenant_template=tenant_template, rules=rules)
            except Exception as exc:  # the request itself rendered; a cut that does not is left unpinned
                log.warning("cache breakpoint after %d messages: the cut prompt did not render (%s); not pinned",
                            mark.messages, exc)
                cut = []
            positions[mark.messages] = common_prefix_len(served, cut) // page_size * page_size
        if positions[mark.messages]:
            pins.append(BreakpointPin(positions[mark.messages], mark.ttl_s * ttl_scale, mark.ttl_s >= LONG_TTL_S))
    return tuple(sorted(pins, key=lambda pin: pin.num_tokens))


def cut_token_ids(request: GenerationRequest, prepared: PreparedRequest, num_messages: int, *, templates: Any,
                  tokenizer: Any, tenant_template: TenantTemplate | None, rules: DynamicRules | None) -> list[int]:
    """Token ids of the request cut after messages[:num_messages], rendered as the request was."""
    messages = list(request.messages)
    head = [dict(message) for message in messages[:num_messages]]
    has_question = num_messages >= len(messages) and messages[-1].get("role") == "user"
    body = dict(request.canonical_input(), messages=head if has_question else [*head, dict(SENTINEL)])
    if not prepared.is_canonicalized:
        return list(render_raw(tokenizer, dict(body, messages=head))) if head else []
    sections = canonicalize(body, rules)
    if not has_question:
        sections.history = sections.history[:-1]  # the sentinel
    sections.received_at = prepared.sections.received_at
    if tenant_template is not None:  # the template the request was rendered with
        rendered = templates.render(tenant_template.name, sections, tokenizer=tokenizer,
                                    tenant_source=tenant_template.source)
    else:
        rendered = templates.render(prepared.template_name, sections, tokenizer=tokenizer)
    segments = [(section, text) for section, text in rendered.segments if section != "generation"]
    return tokenize_segments(tokenizer, segments).token_ids


def common_prefix_len(a, b) -> int:
    num = min(len(a), len(b))
    for i in range(num):
        if a[i] != b[i]:
            return i
    return num


def cache_write_figures(pins: tuple[BreakpointPin, ...], cached_tokens: int) -> tuple[int, int]:
    """(written, written under a 1h breakpoint): the prompt tokens computed by this request up to its last
    breakpoint (up to its last 1h one), i.e. past what the engine served from cache."""
    last = max((pin.num_tokens for pin in pins), default=0)
    last_long = max((pin.num_tokens for pin in pins if pin.is_long), default=0)
    return max(0, last - cached_tokens), max(0, last_long - cached_tokens)


def pin_quota(tenant: Tenant, session_factory: sessionmaker[Session]) -> int:
    """The pin quota bounding the tenant's cache domain: its own, or its cache group's sum (database)."""
    if not tenant.cache_group:
        return tenant.pin_quota_tokens or 0
    from gateway.db.session import session_scope
    from gateway.pins.rows import namespace_quota

    with session_scope(session_factory) as session:
        return namespace_quota(session, tenant)
