"""PromptFingerprint: what the cache diagnosis remembers of one request (hashes and counts, never text).

A fingerprint is made once per prepared request (`fingerprint`) and compared with the caller's
previous one (cache_diagnosis.py). It holds:

    served_pages   a hash chain over the served token ids, one entry per full page: entry i hashes
                   pages 0..i, so two prompts share k full pages iff their first k entries are equal
                   (the engine's radix cache matches whole pages, so this is its unit of reuse)
    boundary       served tokens the next turn can reuse by design: in the canonical layout, all
                   before the dynamic block and the question; in the raw order, the whole prompt
    sections       canonical section hashes; `static_*` hashes are taken with every sentence the
                   dynamic rules recognize removed, so "equal static, different full" means the two
                   texts differ only in dynamic content (a date, a uuid, ...)
    history        per earlier message: (full hash, static hash), for "only appended" checks
    order          hashes of the raw tool order and of the raw role sequence, for "section order"

Memory: one chain of len(prompt) / page_size 64-bit ints plus a few hashes per message.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from gateway.canonicalize import hash_value, message_text

if TYPE_CHECKING:
    from gateway.canonicalize import DynamicRules, Sections

REUSE_BOUNDARY_SEGMENTS = ("dynamic", "question", "generation")  # the canonical layout's per-turn tail


@dataclass(frozen=True)
class PromptFingerprint:
    response_id: str
    tenant_id: int
    domain: str  # the salted cache namespace the request was served in
    model: str
    template: str | None  # "name@version" of a canonical rendering; None for the raw order
    num_tokens: int
    boundary: int
    served_pages: array
    sections: dict[str, str] = field(default_factory=dict)
    history: tuple[tuple[str, str], ...] = ()
    question: tuple[str, str] = ("", "")  # the question as a history message would hash
    order: tuple[str, str] = ("", "")  # (raw tool order, raw role sequence)
    route_key: str | None = None  # the request's session (prompt_cache_key, a Responses chain, an agent session)

    @property
    def canonicalized(self) -> bool:
        return self.template is not None


def page_chain(token_ids: Sequence[int], page_size: int) -> array:
    """Chained hashes of the full pages of `token_ids` (entry i covers pages 0..i)."""
    chain, running = array("q"), 0
    for start in range(0, len(token_ids) - page_size + 1, page_size):
        running = hash((running, tuple(token_ids[start:start + page_size])))
        chain.append(running)
    return chain


def common_pages(left: array, right: array) -> int:
    """How many leading full pages two chains share."""
    limit = min(len(left), len(right))
    low, high = 0, limit  # chains are prefix-closed: equal at i implies equal before i
    while low < high:
        middle = (low + high + 1) // 2
        if left[middle - 1] == right[middle - 1]:
            low = middle
        else:
            high = middle - 1
    return low


def message_hashes(message: dict, rules: DynamicRules) -> tuple[str, str]:
    """(full, static) hash of one conversation message: role, text, tool calls and call id."""
    text = message_text(message)
    rest = {"role": message.get("role"), "tool_calls": message.get("tool_calls"),
            "tool_call_id": message.get("tool_call_id")}
    return hash_value({**rest, "text": text}), hash_value({**rest, "text": rules.split(text).static})


def fingerprint(
    *, response_id: str, tenant_id: int, domain: str, model: str, prepared: Any, request: Any,
    rules: DynamicRules, page_size: int,
) -> PromptFingerprint:
    """The fingerprint of a prepared request (gateway/generation/prepare.py PreparedRequest) of `request`."""
    sections: Sections = prepared.sections
    served = prepared.prompt.token_ids
    boundary = len(served)
    if prepared.is_canonicalized:
        boundary = 0
        for name, count in prepared.section_tokens.items():
            if name in REUSE_BOUNDARY_SEGMENTS:
                break
            boundary += count
    template = f"{prepared.template_name}@{prepared.template_version}" if prepared.is_canonicalized else None
    text = sections.question if isinstance(sections.question, str) else str(sections.question.get("content", ""))
    question = message_hashes({"role": "user", "content": text}, rules)
    return PromptFingerprint(
        response_id=response_id, tenant_id=tenant_id, domain=domain, model=model, template=template,
        num_tokens=len(served), boundary=boundary,
        served_pages=page_chain(served, page_size),
        sections=section_hashes(sections, rules),
        history=tuple(message_hashes(message, rules) for message in sections.history),
        question=question, order=raw_order(request), route_key=request.route_key,
    )


def section_hashes(sections: Sections, rules: DynamicRules) -> dict[str, str]:
    values = sections.section_values()
    hashes = {name: hash_value(value) for name, value in values.items()}
    hashes["static_system"] = hash_value(rules.split(sections.system).static)
    hashes["static_context"] = hash_value([rules.split(doc.text).static for doc in sections.context])
    return hashes


def raw_order(request: Any) -> tuple[str, str]:
    """Hashes of the raw tool-name order and the raw role sequence of `request` (a GenerationRequest)."""
    names = [(tool.get("function") or tool).get("name") for tool in request.tools]
    roles = [message.get("role") for message in request.messages]
    return hash_value(names), hash_value(roles)
