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

from dataclasses import dataclass, field

from gateway.canonicalize.agent_context import split_agent_context
from gateway.canonicalize.context import (
    dedupe_docs,
    docs_from_field,
    extract_docs,
    extract_leading_docs,
    sort_docs_by_id,
)
from gateway.canonicalize.dynamic import DynamicRules, default_rules
from gateway.canonicalize.sections import SECTION_ORDER, Doc, Sections, Signals
from gateway.canonicalize.tools import canonical_tools, is_sorted_by_name
from gateway.canonicalize.whitespace import normalize_whitespace

SYSTEM_ROLES = ("system", "developer")
CONVERSATION_ROLES = ("user", "assistant", "tool", "function")


def canonicalize(body: dict, rules: DynamicRules | None = None, *, sort_context_by_id: bool = False) -> Sections:
    """Split `body` into Sections (see module docstring for every choice)."""
    agent = split_agent_context(validate_messages(body))  # a coding agent's context blocks (agent_context.py)
    parts = split_messages(agent.messages)
    rules = rules or default_rules()
    field_docs = docs_from_field(body.get("context"))
    raw_system = "\n\n".join(part.strip("\n") for part in [*parts.system_parts, *agent.system])
    split = rules.split(normalize_whitespace(raw_system))
    sections = Sections(
        system=normalize_whitespace(split.static),
        tools=canonical_tools(body.get("tools")),
        context=arrange_docs(field_docs + parts.docs, sort_context_by_id),
        history=parts.history,
        dynamic=split.dynamic + agent.dynamic,
        question=parts.question,
    )
    is_canonical = (
        parts.is_system_leading
        and not parts.docs
        and not agent.system
        and raw_system == normalize_whitespace(raw_system)
        and not split.dynamic
        and is_sorted_by_name(body.get("tools") or [])
    )
    patterns = sorted({*split.patterns, *(["git_status"] if agent.dynamic else [])})
    sections.signals = Signals(found_sections(sections), bool(sections.dynamic), is_canonical, patterns)
    return sections


@dataclass
class MessageParts:
    """The raw material of the sections, taken from the messages in one pass."""

    system_parts: list[str] = field(default_factory=list)
    docs: list[Doc] = field(default_factory=list)
    history: list[dict] = field(default_factory=list)
    question: str = ""
    is_system_leading: bool = True


def split_messages(messages: list[dict]) -> MessageParts:
    parts = MessageParts()
    question_index = len(messages) - 1 if messages[-1]["role"] == "user" else None
    for index, message in enumerate(messages):
        text = message_text(message)
        if message["role"] in SYSTEM_ROLES:
            parts.is_system_leading = parts.is_system_leading and not parts.history
            found, rest = extract_docs(text)
            parts.docs.extend(found)
            if rest.strip():
                parts.system_parts.append(rest)
        elif index == question_index:
            found, question = extract_leading_docs(text)
            parts.docs.extend(found)
            parts.question = question.strip()
        else:
            parts.history.append(dict(message))
    return parts


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
