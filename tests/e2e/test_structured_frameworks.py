"""Agent frameworks against a real `radixgate serve`: LangChain, instructor and pydantic-ai (issue 15)."""

from __future__ import annotations

import instructor
import pytest
from openai import AsyncOpenAI, OpenAI
from pydantic import BaseModel

pytestmark = pytest.mark.slow


class Person(BaseModel):
    name: str
    age: int


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"Sunny and 21 C in {city}."


def test_langchain_bind_tools_with_a_forced_tool_gets_tool_calls(gateway_server, tenant_key):
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(base_url=gateway_server.api_base, api_key=tenant_key, model="default", temperature=0,
                     max_tokens=48, max_retries=0)
    reply = llm.bind_tools([get_weather], tool_choice="get_weather").invoke("What is the weather in Lima?")
    (call,) = reply.tool_calls
    assert call["name"] == "get_weather" and isinstance(call["args"]["city"], str)


def test_langchain_with_structured_output_returns_the_pydantic_object(gateway_server, tenant_key):
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(base_url=gateway_server.api_base, api_key=tenant_key, model="default", temperature=0,
                     max_tokens=48, max_retries=0)
    person = llm.with_structured_output(Person).invoke("Ada Lovelace was 36. Extract the person.")
    assert isinstance(person, Person) and isinstance(person.age, int)


def test_instructor_json_schema_mode_returns_the_response_model(gateway_server, tenant_key):
    client = instructor.from_openai(OpenAI(base_url=gateway_server.api_base, api_key=tenant_key, max_retries=0),
                                    mode=instructor.Mode.JSON_SCHEMA)
    person = client.chat.completions.create(
        model="default", response_model=Person, max_retries=0, max_tokens=48, temperature=0,
        messages=[{"role": "user", "content": "Grace Hopper was 85. Extract the person."}])
    assert isinstance(person, Person) and isinstance(person.age, int)


def test_pydantic_ai_agent_calls_its_tool(gateway_server, tenant_key):
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(openai_client=AsyncOpenAI(base_url=gateway_server.api_base, api_key=tenant_key,
                                                        max_retries=0))
    calls: list[str] = []

    def weather(city: str) -> str:
        """Current weather for a city."""
        calls.append(city)
        return f"Sunny and 21 C in {city}."

    def settings(ctx):  # force the tool on the first step, then let the agent answer in text
        return {"tool_choice": ["weather"] if ctx.run_step <= 1 else "none", "max_tokens": 40, "temperature": 0}

    agent = Agent(OpenAIChatModel("default", provider=provider), tools=[weather], model_settings=settings)
    result = agent.run_sync("What is the weather in Porto?")
    assert calls and isinstance(calls[0], str)
    assert isinstance(result.output, str) and result.output
