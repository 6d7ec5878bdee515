"""Grammar: what a request's output must match, as plain data (compiled later, off the step thread).

    Grammar.json_schema({"type": "object", ...})     # one JSON value valid under the schema
    Grammar.json_object()                             # any JSON object
    Grammar.tool_calls([ToolSpec("get_weather", params)], allow_parallel=False)

A grammar is a frozen value: equal grammars compile to the same matcher, so the
compiler caches by `Grammar.key`. `source` is an llguidance grammar (lark text,
possibly with inline `%json {...}` schemas); `trigger` makes the grammar lazy:
the output is free until its text (leading whitespace aside) starts with the
trigger, and from then on it must match the grammar, which then covers the whole
output trigger included. A lazy grammar whose trigger never starts the output
leaves that output free. `finish_reason` is what a request reports when the
grammar ended it (completed, or EOS while the grammar was in force).

JSON is written compact-ish and without free whitespace (", " and ": "
separators, no newlines), so a small model cannot wander into endless blank lines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


@dataclass(frozen=True)
class ToolSpec:
    """One callable function: its name and the JSON schema its arguments must satisfy."""

    name: str
    parameters: dict | None = None

    def call_schema(self) -> dict:
        """{"name": <this name>, "arguments": <valid arguments>}, in that key order."""
        parameters = self.parameters or {"type": "object", "properties": {}}
        return {
            "type": "object",
            "properties": {"name": {"const": self.name}, "arguments": parameters},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }


@dataclass(frozen=True)
class Grammar:
    """A compiled-on-demand output constraint (see the module docstring)."""

    source: str
    trigger: str | None = None
    finish_reason: str = "stop"

    @property
    def key(self) -> str:
        return json.dumps([self.source, self.trigger], separators=(",", ":"))

    @classmethod
    def json_schema(cls, schema: dict) -> Grammar:
        return cls(f"start: %json {schema_json(schema)}\n")

    @classmethod
    def json_object(cls) -> Grammar:
        return cls.json_schema({"type": "object"})

    @classmethod
    def tool_calls(
        cls,
        tools: list[ToolSpec],
        *,
        open_tag: str = "",
        close_tag: str = "",
        padding: str = "",
        allow_parallel: bool = True,
        is_opened: bool = False,
        trigger: str | None = None,
        alternative_schema: dict | None = None,
    ) -> Grammar:
        """One call (or, with allow_parallel, one or more, newline-separated) to one of `tools`.

        Each call is `open_tag [padding] CALL [padding] close_tag`, CALL being
        `{"name": ..., "arguments": ...}` with arguments valid under that tool's parameters.
        is_opened: the first open_tag and its padding are already in the prompt. trigger: lazy
        (tool_choice "auto"). alternative_schema: the output may instead be one JSON value of
        that schema (a structured answer when no tool is called).
        """
        if not tools:
            raise ValueError("a tool-call grammar needs at least one tool")
        call = {"anyOf": [tool.call_schema() for tool in tools]} if len(tools) > 1 else tools[0].call_schema()
        pad = f"{lark_string(padding)}?" if padding else ""
        block = join_lark(lark_string(open_tag), pad, "call", pad, lark_string(close_tag))
        first = join_lark("call", pad, lark_string(close_tag)) if is_opened else block
        calls = join_lark(first, f'("\\n" {block})*' if allow_parallel else "")
        rules = [f"call: %json {schema_json(call)}"]
        if alternative_schema is not None:
            rules.append(f"answer: %json {schema_json(alternative_schema)}")
            calls = f"answer | {calls}"
        source = "\n".join([f"start: {calls}", *rules]) + "\n"
        return cls(source, trigger=trigger, finish_reason="tool_calls")


def join_lark(*parts: str) -> str:
    return " ".join(part for part in parts if part)


def schema_json(schema: dict) -> str:
    """The schema with our JSON layout options, as llguidance reads it inline."""
    return json.dumps({**schema, "x-guidance": {**JSON_OPTIONS, **schema.get("x-guidance", {})}})


def lark_string(text: str) -> str:
    """A lark string literal for `text` ("" for none)."""
    return json.dumps(text) if text else ""
