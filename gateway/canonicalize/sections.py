"""The canonical sections of one chat request and the signals about how they were found.

Canonical order is fixed: system, tools, context, history, dynamic, question.
The first three are *static*: equal static sections across requests must
render to an equal token prefix. Dynamic content (hoisted out of the system
prompt) sits just before the question, after everything cacheable.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

SECTION_ORDER = ("system", "tools", "context", "history", "dynamic", "question")
STATIC_SECTIONS = ("system", "tools", "context")


@dataclass(frozen=True)
class Doc:
    """One retrieved document. `id` is None for anonymous documents."""

    id: str | None
    text: str

    def to_dict(self) -> dict:
        return {"id": self.id, "text": self.text}


@dataclass
class Signals:
    """What the canonicalizer noticed about the raw request.

    found: names of the non-empty sections, in canonical order.
    dynamic_hoisted: some text was moved out of the system prompt.
    was_canonical: the client already sent the canonical layout (system messages
      first, no dynamic content, normalized whitespace, tools sorted by name,
      no documents embedded in messages). The `context` extra field counts as
      canonical: the client leaves the placement to the gateway.
    dynamic_patterns: names of the dynamic rules that matched, sorted, unique.
    """

    found: list[str] = field(default_factory=list)
    dynamic_hoisted: bool = False
    was_canonical: bool = True
    dynamic_patterns: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "found": list(self.found),
            "dynamic_hoisted": self.dynamic_hoisted,
            "was_canonical": self.was_canonical,
            "dynamic_patterns": list(self.dynamic_patterns),
        }


@dataclass
class Sections:
    """A request split into canonical sections (see module docstring).

    tools are sorted by function name with keys sorted recursively; history
    holds OpenAI message dicts in the client's order; question is the text of
    the final user turn ("" when the conversation ends with an assistant turn
    or tool results, which then belong to history).
    """

    system: str = ""
    tools: list[dict] = field(default_factory=list)
    context: list[Doc] = field(default_factory=list)
    history: list[dict] = field(default_factory=list)
    dynamic: list[str] = field(default_factory=list)
    question: str = ""
    signals: Signals = field(default_factory=Signals)
    # When the request arrived (ISO 8601, UTC): a template's `now`. Not a section: never hashed or compared.
    received_at: str = field(default="", compare=False)

    def section_values(self) -> dict[str, object]:
        """JSON-able value of each section, keyed in canonical order."""
        return {
            "system": self.system,
            "tools": self.tools,
            "context": [doc.to_dict() for doc in self.context],
            "history": self.history,
            "dynamic": self.dynamic,
            "question": self.question,
        }

    def hashes(self) -> dict[str, str]:
        """sha256[:16] of each section's canonical JSON; equal sections hash equal."""
        return {name: hash_value(value) for name, value in self.section_values().items()}

    def static_key(self) -> str:
        """One hash over system + tools + context: equal keys render equal static prefixes."""
        values = self.section_values()
        return hash_value([values[name] for name in STATIC_SECTIONS])

    def to_dict(self) -> dict:
        return {**self.section_values(), "signals": self.signals.to_dict()}


def hash_value(value: object) -> str:
    """Stable short hash of a JSON-able value (sorted keys, fixed separators)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
