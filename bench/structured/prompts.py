"""Varied structured-output requests (seeded): JSON-schema extraction, a named tool, a choice of two tools.

Each request is a chat body plus how to check its answer; the same bodies run
with the grammar and without it (the baseline keeps the prompt and any forced
`<tool_call>` opening, and drops only the constraint).
"""

from __future__ import annotations

import random

PERSON_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "city": {"type": "string"}},
    "required": ["name", "age", "city"],
    "additionalProperties": False,
}
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}}
CURRENCY_TOOL = {"type": "function", "function": {
    "name": "convert_currency", "description": "Convert an amount of money between currencies.",
    "parameters": {"type": "object", "properties": {"amount": {"type": "number"}, "source": {"type": "string"},
                                                    "target": {"type": "string"}},
                   "required": ["amount", "source", "target"], "additionalProperties": False}}}
TOOLS = {"get_weather": WEATHER_TOOL, "convert_currency": CURRENCY_TOOL}

NAMES = ["Alice", "Bob", "Chen", "Dana", "Emeka", "Fatima", "Goran", "Hana", "Ivan", "Julia", "Kofi", "Lena"]
CITIES = ["Paris", "Lagos", "Osaka", "Lima", "Oslo", "Cairo", "Denver", "Hanoi", "Porto", "Quito", "Perth", "Bern"]
CURRENCIES = ["USD", "EUR", "JPY", "GBP", "INR", "BRL"]
KINDS = ("json_schema", "named_tool", "required_tool")


def person_body(rng: random.Random) -> dict:
    name, city, age = rng.choice(NAMES), rng.choice(CITIES), rng.randint(18, 90)
    text = rng.choice([f"{name} is {age} years old and lives in {city}.", f"Meet {name} from {city}, aged {age}.",
                       f"Our new colleague {name} ({age}) just moved to {city}."])
    return {"messages": [{"role": "system", "content": "Extract the person as JSON with name, age and city."},
                         {"role": "user", "content": text}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON_SCHEMA,
                                                                       "strict": True}}}


def weather_body(rng: random.Random) -> dict:
    city, unit = rng.choice(CITIES), rng.choice(["celsius", "fahrenheit"])
    question = rng.choice([f"What's the weather in {city}, in {unit}?", f"Is it cold in {city} right now? Use {unit}.",
                           f"Tell me the temperature of {city}."])
    return {"messages": [{"role": "user", "content": question}], "tools": [WEATHER_TOOL],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}


def either_tool_body(rng: random.Random) -> dict:
    if rng.random() < 0.5:
        question = f"How much is {rng.randint(5, 900)} {rng.choice(CURRENCIES)} in {rng.choice(CURRENCIES)}?"
    else:
        question = f"I am flying to {rng.choice(CITIES)} tomorrow. How warm is it there?"
    return {"messages": [{"role": "system", "content": "You are a travel assistant."}, {"role": "user", "content": question}],
            "tools": [WEATHER_TOOL, CURRENCY_TOOL], "tool_choice": "required"}


def make_bodies(num_prompts: int, seed: int = 0) -> list[tuple[str, dict]]:
    """(kind, chat body) pairs, the kinds in turn: json_schema, named_tool, required_tool."""
    rng = random.Random(seed)
    makers = {"json_schema": person_body, "named_tool": weather_body, "required_tool": either_tool_body}
    return [(KINDS[i % len(KINDS)], makers[KINDS[i % len(KINDS)]](rng)) for i in range(num_prompts)]
