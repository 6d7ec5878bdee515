"""OutputSpec: what a request's answer must look like, from its wire fields, for either wire format.

    spec = build_output_spec(response_format=..., tools=..., tool_choice=..., parallel_tool_calls=...)

Chat completions pass their body fields as they are; the Responses API converts
`text.format` and its flat function tools to these chat shapes first, so both
wire formats get the same grammar, the same forced prefix and the same 400s.

  * response_format {"type": "json_object"} / {"type": "json_schema", "json_schema":
    {"name", "schema", "strict"}}: the answer is one JSON value (valid under the schema);
  * tool_choice "required" or {"type": "function", "function": {"name"}}: the answer is a
    call (named: to that tool, exactly one) with arguments valid under the tool's
    `parameters`; the prompt ends with the template's `<tool_call>` opening, the grammar
    does the rest. parallel_tool_calls true: one or more calls; false or unset: exactly one
    (OpenAI's default is true, but a small model under a "one or more" grammar tends to repeat its
    call until max_tokens cuts the last one, so several calls must be asked for);
  * tool_choice "auto" (or absent, with tools): free text, but an answer that starts a
    `<tool_call>` is completed under the grammar (a lazy grammar, engine.grammar.spec).

Schemas are closed before they become grammars: an object schema that lists
`properties` and says nothing of `additionalProperties` gets `false` (what OpenAI's
strict mode does). An answer valid under the closed schema is valid under the
client's, and a small model cannot fill its arguments with echoes of the schema.

Every refusal is an ApiError 400 naming the offending field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine import Grammar, ToolSpec
from gateway.chat.tool_calls import OPEN_TAG, TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from gateway.errors import bad_request


@dataclass(frozen=True)
class OutputSpec:
    """grammar: the engine constraint (None: free). assistant_prefix: text the answer starts with,
    already decided (appended to the prompt). is_tool_call_forced: the answer is a call."""

    grammar: Grammar | None = None
    assistant_prefix: str = ""
    is_tool_call_forced: bool = False


def build_output_spec(
    *, response_format: dict | None, tools: list[dict] | None, tool_choice: Any, parallel_tool_calls: bool | None
) -> OutputSpec:
    """The OutputSpec of a request's structured-output and tool fields (chat-completions shapes)."""
    answer_schema = json_answer_schema(response_format)
    specs = tool_specs(tools or [])
    choice = normalize_tool_choice(tool_choice, specs)
    allow_parallel = parallel_tool_calls is True  # unset: one call (see the module docstring)
    if choice == "none" or not specs:
        return OutputSpec(grammar=Grammar.json_schema(close_objects(answer_schema)) if answer_schema is not None else None)
    if choice == "auto":
        grammar = Grammar.tool_calls(specs, open_tag=OPEN_TAG, close_tag=TOOL_CALL_CLOSE, padding="\n",
                                     allow_parallel=allow_parallel, trigger=None if answer_schema else OPEN_TAG,
                                     alternative_schema=close_objects(answer_schema) if answer_schema else None)
        return OutputSpec(grammar=grammar)
    if choice != "required":
        specs, allow_parallel = [spec for spec in specs if spec.name == choice], False
    grammar = Grammar.tool_calls(specs, open_tag=OPEN_TAG, close_tag=TOOL_CALL_CLOSE, padding="\n",
                                 allow_parallel=allow_parallel, is_opened=True)
    return OutputSpec(grammar=grammar, assistant_prefix=TOOL_CALL_OPEN, is_tool_call_forced=True)


def json_answer_schema(response_format: dict | None) -> dict | None:
    """The schema the answer must satisfy ({"type": "object"} for json_object), or None for free text."""
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise bad_request("response_format must be an object.", "response_format")
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind != "json_schema":
        raise bad_request(f"response_format.type {kind!r} is not supported: use 'text', 'json_object' or "
                          "'json_schema'.", "response_format.type")
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
        raise bad_request("response_format.json_schema must be an object with a non-empty 'name'.",
                          "response_format.json_schema")
    schema = spec.get("schema", {"type": "object"})
    check_schema(schema, "response_format.json_schema.schema")
    return schema


def tool_specs(tools: list[dict]) -> list[ToolSpec]:
    specs = []
    for index, tool in enumerate(tools):
        function = tool.get("function") or {}
        parameters = function.get("parameters")
        if parameters is not None:
            check_schema(parameters, f"tools[{index}].function.parameters")
        specs.append(ToolSpec(function.get("name"), close_objects(parameters) if parameters is not None else None))
    return specs


def normalize_tool_choice(tool_choice: Any, specs: list[ToolSpec]) -> str:
    """"none", "auto", "required", or the name of the one function the answer must call."""
    if tool_choice is None:
        return "auto"
    if tool_choice in ("none", "auto", "required"):
        if tool_choice == "required" and not specs:
            raise bad_request("tool_choice 'required' needs at least one tool in tools.", "tool_choice")
        return tool_choice
    name = (tool_choice.get("function") or {}).get("name") if isinstance(tool_choice, dict) else None
    if not isinstance(name, str) or not name:
        raise bad_request("tool_choice must be 'none', 'auto', 'required' or "
                          "{'type': 'function', 'function': {'name': ...}}.", "tool_choice")
    if name not in {spec.name for spec in specs}:
        raise bad_request(f"tool_choice names {name!r}, which is not in tools.", "tool_choice", "unknown_tool")
    return name


def check_schema(schema: Any, param: str) -> None:
    """400 unless `schema` is a valid JSON Schema (the compiler may still refuse features it lacks)."""
    import jsonschema

    if not isinstance(schema, dict):
        raise bad_request(f"{param} must be a JSON Schema object.", param, "invalid_schema")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise bad_request(f"{param} is not a valid JSON Schema: {exc.message}", param, "invalid_schema") from exc


SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
SCHEMA_VALUES = ("items", "additionalProperties", "not", "contains")


def close_objects(schema: Any) -> Any:
    """A copy of `schema` where every object schema with `properties` and no `additionalProperties` is closed."""
    if not isinstance(schema, dict):
        return schema
    closed = dict(schema)
    for key in SCHEMA_MAPS:
        if isinstance(closed.get(key), dict):
            closed[key] = {name: close_objects(sub) for name, sub in closed[key].items()}
    for key in SCHEMA_LISTS:
        if isinstance(closed.get(key), list):
            closed[key] = [close_objects(sub) for sub in closed[key]]
    for key in SCHEMA_VALUES:
        if isinstance(closed.get(key), dict):
            closed[key] = close_objects(closed[key])
    if isinstance(closed.get("properties"), dict) and "additionalProperties" not in closed:
        closed["additionalProperties"] = False
    return closed
