"""How a model's tool calls and structured answers fare through a real `radixgate serve` (issue 43).

    python -m bench.tool_answers --model qwen2.5-coder-0.5b [--cities 10] [--agents 10] [--max-tokens 60]

Prints two figures, each over greedy answers to distinct prompts:
  * auto: under tool_choice "auto" with one get_weather tool, how often "What is the weather like in
    <city>?" comes back as a get_weather call naming that city (and how often as content);
  * agents: how often the OpenAI Agents SDK (chat-completions mode) with a pydantic `output_type` and a
    `--max-tokens` budget raises (the SDK's "Invalid JSON" when the answer was cut) instead of
    returning the object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid

import httpx
from pydantic import BaseModel

from bench.server import ServerProcess

CITIES = ("Paris", "Tokyo", "Lima", "Oslo", "Nairobi", "Toronto", "Madrid", "Cairo", "Sydney", "Mumbai",
          "Berlin", "Santiago", "Hanoi", "Dublin", "Lagos", "Seoul", "Quito", "Vienna", "Manila", "Denver")
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


class CityFacts(BaseModel):
    city: str
    country: str
    population_millions: float
    famous_for: list[str]


def auto_call_rate(client, cities: list[str]) -> dict:
    """Per city: "call" (get_weather naming it), "wrong call", or "content"."""
    outcomes = {}
    for city in cities:
        response = client.chat.completions.create(
            model="default", messages=[{"role": "user", "content": f"What is the weather like in {city}?"}],
            tools=[WEATHER], max_tokens=60, temperature=0)
        calls = response.choices[0].message.tool_calls or []
        right = [c for c in calls if c.function.name == "get_weather"
                 and city.lower() in str(json.loads(c.function.arguments or "{}").get("city", "")).lower()]
        outcomes[city] = "call" if right else ("wrong call" if calls else "content")
    return outcomes


async def agents_invalid_rate(base_url: str, key: str, cities: list[str], max_tokens: int) -> dict:
    """Per city: "ok" or the exception the Agents SDK raised."""
    import agents
    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner
    from openai import AsyncOpenAI

    agents.set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=600)
    agent = Agent(name="facts", instructions="Give facts about the city.", output_type=CityFacts,
                  model=OpenAIChatCompletionsModel(model="default", openai_client=client),
                  model_settings=ModelSettings(temperature=0, max_tokens=max_tokens))
    outcomes = {}
    for city in cities:
        try:
            result = await Runner.run(agent, city)
            outcomes[city] = "ok" if isinstance(result.final_output, CityFacts) else "not the type"
        except Exception as exc:  # noqa: BLE001 — the figure is what the SDK raises
            outcomes[city] = f"{type(exc).__name__}: {str(exc)[:80]}"
    return outcomes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--cities", type=int, default=10)
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=60)
    args = parser.parse_args()
    from openai import OpenAI

    env = {"RADIXGATE_ENGINE__KV_CACHE_TOKENS": "16384", "RADIXGATE_ENGINE__DEVICE": "cpu"}
    with ServerProcess(env=env, args=["--model", args.model]) as server:
        tenant = httpx.post(f"{server.url}/admin/tenants", json={"name": f"bench-{uuid.uuid4().hex[:8]}"},
                            headers={"Authorization": f"Bearer {server.admin_key}"}, timeout=60).json()
        key = tenant["api_key"]["key"]
        client = OpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0, timeout=600)
        auto = auto_call_rate(client, list(CITIES[: args.cities]))
        agent = asyncio.run(agents_invalid_rate(f"{server.url}/v1", key, list(CITIES[: args.agents]), args.max_tokens))
    right = sum(outcome == "call" for outcome in auto.values())
    print(f"model {args.model}")
    print(f"auto tool_choice: {right}/{len(auto)} weather questions became a get_weather call naming the city  {auto}")
    failed = {city: outcome for city, outcome in agent.items() if outcome != "ok"}
    print(f"agents SDK output_type, max_tokens={args.max_tokens}: {len(failed)}/{len(agent)} raised  {failed}")


if __name__ == "__main__":
    main()
