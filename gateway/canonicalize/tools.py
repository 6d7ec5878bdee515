"""Tool definitions in canonical form: sorted by function name, keys sorted, fixed JSON.

Invariant: two tool lists that differ only in list order or JSON key order have
equal canonical forms and equal `tools_json` text.
"""

from __future__ import annotations

import json

JSON_SEPARATORS = (",", ":")


def canonical_tools(tools: object) -> list[dict]:
    """Tools sorted by function name (stable for equal names), keys sorted recursively."""
    if tools is None:
        return []
    if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
        raise ValueError("tools must be a list of objects")
    return sorted((sort_keys(tool) for tool in tools), key=tool_name)


def tool_name(tool: dict) -> str:
    """The function name of an OpenAI tool ({"type": "function", "function": {...}}) or a bare function."""
    function = tool.get("function")
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        return function["name"]
    return str(tool.get("name", ""))


def sort_keys(value: object) -> object:
    """A copy of a JSON value with every object's keys in sorted order."""
    if isinstance(value, dict):
        return {key: sort_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [sort_keys(item) for item in value]
    return value


def to_json(value: object) -> str:
    """Canonical JSON text: sorted keys, fixed separators, unicode kept."""
    return json.dumps(value, sort_keys=True, separators=JSON_SEPARATORS, ensure_ascii=False)


def is_sorted_by_name(tools: list[dict]) -> bool:
    names = [tool_name(tool) for tool in tools]
    return names == sorted(names)
