"""canonicalize(): split an OpenAI chat body into canonical sections.

Decisions (documented contract):
- system: every system/developer message (wherever it sits) contributes its
  text, minus <context>/<document> blocks, joined by a blank line; whitespace
  normalized; then dynamic sentences are hoisted out (see dynamic.py).
- context: the `context` extra field first, then documents found in messages in
  message order; duplicates (same id) kept once; sorted by id on request.
- question: the last message when it is a user message (text parts joined, a
  leading <context>/<document> block moved to context, outer space stripped).
  A conversation that ends with an assistant turn or tool results has no
  question: question is "" and those messages stay in history, in order.
- history: all other user/assistant/tool messages, verbatim, in order.
Malformed bodies raise ValueError with a message fit for a 400 response.
"""

from __future__ import annotations

from gateway.canonicalize.context import (
    dedupe_docs,
    docs_from_field,
    extract_docs,
    extract_leading_docs,
    sort_docs_by_id,
)
from gateway.canonicalize.dynamic import DynamicRules
from gateway.canonicalize.sections import SECTION_ORDER, Doc, Sections, Signals
from gateway.canonicalize.tools import canonical_tools, is_sorted_by_name
from gateway.canonicalize.whitespace import normalize_whitespace

SYSTEM_ROLES = ("system", "developer")
CONVERSATION_ROLES = ("user", "assistant", "tool", "function")


def canonicalize(body: dict, rules: DynamicRules | None = None, *, sort_context_by_id: bool = False) -> Sections:
    """Split `body` into Sections (see module docstring for every choice)."""
    messages = validate_messages(body)
    rules = rules or DynamicRules()
    docs = docs_from_field(body.get("context"))
    num_field_docs = len(docs)
    question_index = len(messages) - 1 if messages[-1]["role"] == "user" else None
    system_parts, history, question = [], [], ""
    is_system_leading = True
    for index, message in enumerate(messages):
        text = message_text(message)
        if message["role"] in SYSTEM_ROLES:
            is_system_leading = is_system_leading and not history
            found, rest = extract_docs(text)
            docs.extend(found)
            if rest.strip():
                system_parts.append(rest)
        elif index == question_index:
            found, question = extract_leading_docs(text)
            docs.extend(found)
            question = question.strip()
        else:
            history.append(dict(message))
    raw_system = "\n\n".join(part.strip("\n") for part in system_parts)
    split = rules.split(normalize_whitespace(raw_system))
    sections = Sections(
        system=normalize_whitespace(split.static),
        tools=canonical_tools(body.get("tools")),
        context=arrange_docs(docs, sort_context_by_id),
        history=history,
        dynamic=split.dynamic,
        question=question,
    )
    is_canonical = (
        is_system_leading
        and len(docs) == num_field_docs
        and raw_system == normalize_whitespace(raw_system)
        and not split.dynamic
        and is_sorted_by_name(body.get("tools") or [])
    )
    sections.signals = Signals(
        found=found_sections(sections),
        dynamic_hoisted=bool(split.dynamic),
        was_canonical=is_canonical,
        dynamic_patterns=split.patterns,
    )
    return sections


def validate_messages(body: object) -> list[dict]:
    """The body's messages; raises ValueError when the body is not a chat request."""
    if not isinstance(body, dict):
        raise ValueError("request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("'messages' must be a non-empty list")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in SYSTEM_ROLES + CONVERSATION_ROLES:
            raise ValueError(f"messages[{index}] must be an object with a role in {SYSTEM_ROLES + CONVERSATION_ROLES}")
    return messages


def message_text(message: dict) -> str:
    """Text of a message: a string content, or its text parts joined by newlines."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text")
    raise ValueError(f"message content must be a string or a list of parts, not {type(content).__name__}")


def arrange_docs(docs: list[Doc], sort_by_id: bool) -> list[Doc]:
    unique = dedupe_docs(docs)
    return sort_docs_by_id(unique) if sort_by_id else unique


def found_sections(sections: Sections) -> list[str]:
    values = sections.section_values()
    return [name for name in SECTION_ORDER if values[name]]
