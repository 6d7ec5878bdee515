"""Schema-valid rate of forced structured outputs, with the grammar and without it, side by side.

Every body goes through the gateway's own preparation (canonicalize, template,
OutputSpec) and then the engine, all of one mode submitted at once. An answer
counts as valid when:
  * json_schema: the text parses as JSON and validates against the schema;
  * a forced tool: the forced opening plus the text parses as exactly one call to
    an offered tool (the named one, for a named tool_choice) whose arguments
    validate against that tool's parameters.
"""

from __future__ import annotations

import json
from concurrent.futures import Future

import jsonschema

from engine import SamplingParams
from bench.structured.prompts import TOOLS
from gateway.chat.parse import generation_request
from gateway.chat.schemas import ChatCompletionRequest
from gateway.generation.prepare import prepare_request
from gateway.generation.tool_calls import parse_tool_calls


def is_valid_answer(kind: str, body: dict, text: str) -> bool:
    if kind == "json_schema":
        schema = body["response_format"]["json_schema"]["schema"]
        try:
            jsonschema.validate(json.loads(text), schema)
        except (ValueError, jsonschema.ValidationError):
            return False
        return True
    offered = {tool["function"]["name"] for tool in body["tools"]}
    calls = parse_tool_calls(text, frozenset(offered))
    if not calls or len(calls) != 1:
        return False
    choice = body["tool_choice"]
    name = calls[0].name
    if isinstance(choice, dict) and name != choice["function"]["name"]:
        return False
    try:
        jsonschema.validate(json.loads(calls[0].arguments), TOOLS[name]["function"]["parameters"])
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


def generate_all(engine, requests: list[tuple[list[int], SamplingParams]]) -> list:
    futures = []
    for token_ids, params in requests:
        future: Future = Future()
        engine.submit(token_ids, params, lambda out, f=future: out.is_finished and f.set_result(out))
        futures.append(future)
    return [future.result(timeout=900) for future in futures]


def run_validity(engine, templates, bodies: list[tuple[str, dict]], max_tokens: int, temperature: float) -> dict:
    """{"constrained"|"unconstrained": {"valid", "total", "by_kind", "examples"}} over the same bodies."""
    prepared = []
    for _, body in bodies:
        request = ChatCompletionRequest(model="default", max_tokens=max_tokens, temperature=temperature, **body)
        prepared.append(prepare_request(generation_request(request), templates=templates, tokenizer=engine.tokenizer,
                                        model_id=engine.model_id, max_context=engine.max_context,
                                        default_max_tokens=max_tokens))
    result = {}
    for mode in ("constrained", "unconstrained"):
        requests = []
        for item in prepared:
            params = SamplingParams(max_tokens=item.params.max_tokens, temperature=temperature, seed=0,
                                    stop=list(item.params.stop), grammar=item.params.grammar if mode == "constrained" else None)
            requests.append((list(item.prompt.token_ids), params))
        outputs = generate_all(engine, requests)
        texts = [item.prompt.assistant_prefix + out.output_text for item, out in zip(prepared, outputs)]
        verdicts = [is_valid_answer(kind, body, text) for (kind, body), text in zip(bodies, texts)]
        by_kind: dict[str, list[int]] = {}
        for (kind, _), is_valid in zip(bodies, verdicts):
            by_kind.setdefault(kind, [0, 0])
            by_kind[kind][0] += int(is_valid)
            by_kind[kind][1] += 1
        result[mode] = {"valid": sum(verdicts), "total": len(verdicts), "by_kind": by_kind,
                        "examples": [t for t, ok in zip(texts, verdicts) if not ok][:3] or texts[:1]}
    return result


def format_validity(result: dict) -> list[str]:
    lines = ["mode           valid   " + "   ".join(sorted(result["constrained"]["by_kind"]))]
    for mode in ("constrained", "unconstrained"):
        row = result[mode]
        kinds = "   ".join(f"{v}/{n}".rjust(len(k)) for k, (v, n) in sorted(row["by_kind"].items()))
        lines.append(f"{mode:<14} {row['valid']:>2}/{row['total']:<4} {kinds}")
    return lines
