"""A tenant's own dynamic-content rules: validation, storage form, and compiled rule sets.

Contracts:
- Rules are `{name: regex}`; they extend the default rules (same name replaces a default).
- `validate_rules` compiles them once and raises ValueError naming the first bad rule.
- The stored form is canonical JSON (sorted keys), so equal rule sets have equal text and
  `compile_rules` (an LRU cache keyed by that text) compiles each distinct set only once.
- `None` / empty rules mean the default rules only.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Mapping

from gateway.canonicalize import DynamicRules

MAX_NUM_CACHED_RULE_SETS = 256


def validate_rules(patterns: Mapping[str, Any] | None) -> dict[str, str]:
    """The rules as a plain dict; raises ValueError for a non-string name/pattern or a bad regex (naming the rule)."""
    rules = dict(patterns or {})
    for name, source in rules.items():
        if not isinstance(name, str) or not name or not isinstance(source, str) or not source:
            raise ValueError(f"dynamic rule {name!r} must map a non-empty name to a non-empty regex string")
    DynamicRules().extend(rules)
    return rules


def dump_rules(patterns: Mapping[str, str] | None) -> str | None:
    """The stored form: canonical JSON text, or None for no rules."""
    return json.dumps(dict(patterns), sort_keys=True) if patterns else None


def load_rules(text: str | None) -> dict[str, str]:
    """The rules stored as `text` (empty for None)."""
    return dict(json.loads(text)) if text else {}


@lru_cache(maxsize=MAX_NUM_CACHED_RULE_SETS)
def compile_rules(text: str | None) -> DynamicRules:
    """The compiled rule set for a stored JSON text (defaults only for None), cached by that text."""
    return DynamicRules().extend(load_rules(text))


def rules_for(tenant: Any) -> DynamicRules:
    """The compiled rules a tenant's requests canonicalize with."""
    return compile_rules(getattr(tenant, "dynamic_rules", None))
