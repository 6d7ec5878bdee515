"""Dynamic-content rules: which sentences of a system prompt change per request.

A rule is a named regular expression (case-insensitive). A sentence of the
system prompt that any rule matches is *dynamic*: it is moved out of the
cacheable prefix and placed just before the question. Tenants extend the
defaults with their own rules (`DynamicRules.extend`); rule sets are immutable.

Sentences are split at `. ! ?` followed by white space and a capital letter
(or an opening quote or bracket), so "Nov. 2, 2026" or "e.g. x" stay whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Mapping

_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"

DEFAULT_PATTERNS: dict[str, str] = {
    "iso_datetime": r"\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}",
    "date_iso": r"\b\d{4}[-/.]\d{1,2}[-/.]\d{1,2}\b",
    "date_numeric": r"\b\d{1,2}[/-]\d{1,2}[/-]\d{2,4}\b|\b\d{1,2}\.\d{1,2}\.\d{4}\b",
    "date_words": (
        rf"\b{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}\b"
        rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\.?,?\s+\d{{4}}\b"
    ),
    "weekday_date": rf"\b{_WEEKDAY},?\s+(?:{_MONTH}|\d)",
    "clock_time": r"\b\d{1,2}:\d{2}(?::\d{2})?\s*(?:am|pm|utc|gmt|z)\b|\b\d{2}:\d{2}:\d{2}\b",
    "unix_timestamp": r"\b1[5-9]\d{8}(?:\d{3})?\b",
    "uuid": r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",
    "hex_id": r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{24,}\b",
    "request_id": r"\b(?:request|req|trace|span|session|correlation|conversation|run)[ _-]?id\s*[:=#]\s*\S+",
    "current_time": r"\b(?:current|local)\s+(?:date|time|datetime|timestamp)\s*(?:is\b|:)",
    "today_is": r"\b(?:today|tonight)\s+is\b|\btoday's date\b",
    "speaking_with": r"\byou are (?:now )?(?:speaking|talking|chatting) (?:with|to)\b",
    "user_name": r"\b(?:the )?(?:user|customer)(?:'s)? name is\b|\b(?:user|customer) is (?:named|called)\b",
    # Claude Code's first system block: its cc_version carries a per-session hash (agent_context.py)
    "billing_header": r"^\s*x-anthropic-billing-header\s*:",
}

SPLIT_CACHE_TEXTS = 1024  # distinct texts whose split each rule set remembers
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(\[])")


@dataclass(frozen=True)
class DynamicSplit:
    """static: the text with dynamic sentences removed (lines that became empty
    are dropped); dynamic: the removed sentences in order; patterns: names of
    the rules that matched, sorted."""

    static: str
    dynamic: list[str] = field(default_factory=list)
    patterns: list[str] = field(default_factory=list)


class DynamicRules:
    """An immutable, ordered set of named dynamic-content rules."""

    def __init__(self, patterns: Mapping[str, str] | None = None, *, include_defaults: bool = True):
        merged = dict(DEFAULT_PATTERNS) if include_defaults else {}
        merged.update(patterns or {})
        self._rules = tuple((name, compile_rule(name, source)) for name, source in merged.items())
        # A rule set is immutable, so a text's split is a pure function of the text: remembered (the same
        # system prompts and documents come back request after request); lru_cache is thread-safe.
        self._split = lru_cache(maxsize=SPLIT_CACHE_TEXTS)(self._split_uncached)

    def extend(self, patterns: Mapping[str, str]) -> "DynamicRules":
        """A new rule set: these rules plus `patterns` (same name replaces)."""
        merged = {name: rule.pattern for name, rule in self._rules}
        merged.update(patterns)
        return DynamicRules(merged, include_defaults=False)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self._rules]

    def match(self, sentence: str) -> list[str]:
        """Names of the rules that match `sentence` (empty: the sentence is static)."""
        return [name for name, rule in self._rules if rule.search(sentence)]

    def split(self, text: str) -> DynamicSplit:
        """Separate the dynamic sentences of `text` from its static rest."""
        found = self._split(text)
        return replace(found, dynamic=list(found.dynamic), patterns=list(found.patterns))  # the caller's to keep

    def _split_uncached(self, text: str) -> DynamicSplit:
        static_lines, dynamic, matched = [], [], set()
        for line in text.split("\n"):
            kept = []
            for sentence in split_sentences(line):
                names = self.match(sentence)
                if names:
                    dynamic.append(sentence.strip())
                    matched.update(names)
                else:
                    kept.append(sentence)
            if kept or not line.strip():
                static_lines.append(" ".join(kept) if len(kept) > 1 else (kept[0] if kept else line))
        return DynamicSplit("\n".join(static_lines), dynamic, sorted(matched))


def split_sentences(line: str) -> list[str]:
    """Sentences of one line; indentation stays on the first sentence."""
    return [part for part in _SENTENCE_BREAK.split(line) if part]


@lru_cache(maxsize=1)
def default_rules() -> DynamicRules:
    """The default rule set, compiled once (and so remembering its splits across requests)."""
    return DynamicRules()


def compile_rule(name: str, source: str) -> re.Pattern:
    """Compile one rule; a bad pattern raises ValueError naming the rule."""
    if not isinstance(source, str) or not source:
        raise ValueError(f"dynamic rule {name!r}: pattern must be a non-empty string")
    try:
        return re.compile(source, re.IGNORECASE)
    except re.error as exc:
        raise ValueError(f"dynamic rule {name!r}: invalid regular expression: {exc}") from exc
