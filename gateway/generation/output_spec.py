"""OutputSpec: what a request's answer must look like, from its output constraint and tool fields.

    spec = build_output_spec(output=..., tools=..., tool_choice=..., parallel_tool_calls=...)

Every wire format parses its own fields into OutputFormat / ToolChoice (gateway/routing/backend.py),
so all of them get the same grammar, the same forced prefix and the same 400s:

  * OutputFormat json_object / json_schema: the answer is one JSON value (valid under the schema);
  * ToolChoice "required" or "function" (a name): the answer is a call (named: to that tool,
    exactly one) with arguments valid under the tool's `parameters`; the prompt ends with the
    template's `<tool_call>` opening, the grammar does the rest. parallel_tool_calls true: one or
    more calls; false or unset: exactly one (OpenAI's default is true, but a small model under a
    "one or more" grammar tends to repeat its call until max_tokens cuts the last one, so several
    calls must be asked for);
  * ToolChoice "auto" (or None, with tools): free text, but an answer that starts a
    `<tool_call>` is completed under the grammar (a lazy grammar, engine.grammar.spec).

Schemas are closed before they become grammars: an object schema that lists
`properties` and says nothing of `additionalProperties` gets `false` (what OpenAI's
strict mode does). An answer valid under the closed schema is valid under the
client's, and a small model cannot fill its arguments with echoes of the schema.

Every refusal is an ApiError 400 about an internal field (errors.field_error), named by the
caller's wire format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine import Grammar, ToolSpec
from gateway.errors import FieldPath, field_error
from gateway.generation.tool_calls import OPEN_TAG, TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from gateway.routing.backend import OutputFormat, ToolChoice


@dataclass(frozen=True)
class OutputSpec:
    """grammar: the engine constraint (None: free). assistant_prefix: text the answer starts with,
    already decided (appended to the prompt). is_tool_call_forced: the answer is a call."""

    grammar: Grammar | None = None
    assistant_prefix: str = ""
    is_tool_call_forced: bool = False


def build_output_spec(
    *, output: OutputFormat | None, tools: tuple[dict, ...], tool_choice: ToolChoice | None,
    parallel_tool_calls: bool | None,
) -> OutputSpec:
    """The OutputSpec of a request's output constraint and tools (tools in the chat template's form)."""
    answer_schema = json_answer_schema(output)
    specs = tool_specs(tools)
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


def json_answer_schema(output: OutputFormat | None) -> dict | None:
    """The schema the answer must satisfy ({"type": "object"} for json_object), or None for free text."""
    if output is None:
        return None
    if output.kind == "json_object":
        return {"type": "object"}
    schema = {"type": "object"} if output.schema is None else output.schema
    check_schema(schema, ("output", "schema"))
    return schema


def tool_specs(tools: tuple[dict, ...]) -> list[ToolSpec]:
    specs = []
    for index, tool in enumerate(tools):
        function = tool.get("function") or {}
        parameters = function.get("parameters")
        if parameters is not None:
            check_schema(parameters, ("tools", index, "parameters"))
        specs.append(ToolSpec(function.get("name"), close_objects(parameters) if parameters is not None else None))
    return specs


def normalize_tool_choice(tool_choice: ToolChoice | None, specs: list[ToolSpec]) -> str:
    """"none", "auto", "required", or the name of the one function the answer must call."""
    if tool_choice is None:
        return "auto"
    if tool_choice.mode == "required" and not specs:
        raise field_error(("tool_choice",), lambda p: f"{p} 'required' needs at least one tool in tools.")
    if tool_choice.mode != "function":
        return tool_choice.mode
    if tool_choice.name not in {spec.name for spec in specs}:
        name = tool_choice.name
        raise field_error(("tool_choice",), lambda p: f"{p} names {name!r}, which is not in tools.", "unknown_tool")
    return tool_choice.name


def check_schema(schema: Any, field: FieldPath) -> None:
    """400 unless `schema` is a valid JSON Schema (the compiler may still refuse features it lacks)."""
    import jsonschema

    if not isinstance(schema, dict):
        raise field_error(field, lambda p: f"{p} must be a JSON Schema object.", "invalid_schema")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        detail = exc.message
        raise field_error(field, lambda p: f"{p} is not a valid JSON Schema: {detail}", "invalid_schema") from exc


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
