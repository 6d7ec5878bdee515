"""The OpenAI Agents SDK (`openai-agents`) against a real `radixgate serve`: its default Responses mode
and OpenAIChatCompletionsModel, a forced function tool, a pydantic output_type, a chain by previous_response_id."""

from __future__ import annotations

import agents
import pytest
from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool
from agents.models.openai_provider import OpenAIProvider
from openai import AsyncOpenAI
from pydantic import BaseModel

from engine import EngineConfig

pytestmark = pytest.mark.slow

PAGE_SIZE = EngineConfig().page_size


class CityFacts(BaseModel):
    city: str
    country: str


@pytest.fixture(autouse=True)
def no_tracing():
    agents.set_tracing_disabled(True)  # the tracing exporter would try the network


@pytest.fixture()
def openai_client(gateway_server, tenant_key) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=gateway_server.api_base, api_key=tenant_key, max_retries=0, timeout=180)


@pytest.fixture(params=["responses", "chat_completions"])
def run_config(request, openai_client) -> RunConfig:
    """The SDK's own default provider (Responses API), or its chat-completions mode."""
    use_responses = request.param == "responses"
    return RunConfig(model_provider=OpenAIProvider(openai_client=openai_client, use_responses=use_responses),
                     tracing_disabled=True)


def weather_agent(calls: list[str]) -> Agent:
    @function_tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        calls.append(city)
        return f"Sunny, 21 C in {city}"

    return Agent(name="weather", instructions="You are a weather assistant.", tools=[get_weather], model="default",
                 model_settings=ModelSettings(tool_choice="required", temperature=0, max_tokens=40),
                 tool_use_behavior="stop_on_first_tool")


async def test_agent_must_call_its_function_tool(run_config):
    calls: list[str] = []
    result = await Runner.run(weather_agent(calls), "What's the weather in Paris?", run_config=run_config)
    assert len(calls) == 1 and isinstance(calls[0], str) and calls[0]
    assert result.final_output == f"Sunny, 21 C in {calls[0]}"


async def test_agent_with_a_pydantic_output_type_gets_a_valid_object(run_config):
    agent = Agent(name="facts", instructions="Give the city and its country.", output_type=CityFacts, model="default",
                  model_settings=ModelSettings(temperature=0, max_tokens=40))
    result = await Runner.run(agent, "Paris", run_config=run_config)
    assert isinstance(result.final_output, CityFacts) and result.final_output.city and result.final_output.country


async def test_two_turn_run_chained_by_previous_response_id_hits_the_cache(openai_client):
    model = agents.OpenAIResponsesModel(model="default", openai_client=openai_client)
    agent = Agent(name="chat", instructions="Answer in one short sentence.", model=model,
                  model_settings=ModelSettings(temperature=0, max_tokens=24))
    first = await Runner.run(agent, "What is the capital of France?")
    second = await Runner.run(agent, "And of Italy?", previous_response_id=first.last_response_id)
    assert "Paris" in first.final_output and "Rome" in second.final_output
    [first_usage], [second_usage] = [r.usage for r in first.raw_responses], [r.usage for r in second.raw_responses]
    assert second_usage.input_tokens_details.cached_tokens >= first_usage.input_tokens // PAGE_SIZE * PAGE_SIZE


async def test_streamed_run_over_responses_events(openai_client):
    model = agents.OpenAIResponsesModel(model="default", openai_client=openai_client)
    agent = Agent(name="chat", instructions="Answer in one short sentence.", model=model,
                  model_settings=ModelSettings(temperature=0, max_tokens=24))
    streamed = Runner.run_streamed(agent, "What is the capital of France?")
    deltas = [event.data.delta async for event in streamed.stream_events()
              if event.type == "raw_response_event" and event.data.type == "response.output_text.delta"]
    assert "".join(deltas) == streamed.final_output and "Paris" in streamed.final_output
