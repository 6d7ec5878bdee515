"""Qwen2.5-Coder-0.5B-Instruct behind a real `radixgate serve`, through the `openai` client and LangChain:
its own chat format (the prompt is what its chat template renders), answers, tool calls under
tool_choice auto and forced, structured output, and cut answers reporting finish_reason "length".

One server for the module, a handful of requests with short max_tokens (issue 43)."""

from __future__ import annotations

import json

import httpx
import jsonschema
import pytest
from openai import OpenAI

from tests.e2e.conftest import STARTUP_TIMEOUT_S, GatewayServer
from tests.support.server_process import RADIXGATE

pytestmark = pytest.mark.slow

QWEN_MODEL = "qwen2.5-coder-0.5b"  # fetched and dequantized by `make test`'s warmup
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
FORCED = {"type": "function", "function": {"name": "get_weather"}}
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
MARKUP = ("<tool_call>", "</tool_call>", '"arguments"')


@pytest.fixture(scope="module")
def qwen_server(tmp_path_factory):
    env = {"RADIXGATE_ENGINE__KV_CACHE_TOKENS": "16384", "RADIXGATE_ENGINE__DEVICE": "cpu",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    server = GatewayServer(env=env, workdir=tmp_path_factory.mktemp("qwen-server"), command=[str(RADIXGATE)],
                           args=["--model", QWEN_MODEL])
    try:
        yield server.start(STARTUP_TIMEOUT_S * 3)  # the 0.5B loads slower than the 135M
    finally:
        server.stop()


@pytest.fixture(scope="module")
def qwen_key(qwen_server) -> str:
    return qwen_server.create_tenant()["api_key"]["key"]


@pytest.fixture(scope="module")
def client(qwen_server, qwen_key) -> OpenAI:
    return OpenAI(base_url=qwen_server.api_base, api_key=qwen_key, max_retries=0, timeout=300)


def ask_weather(city: str) -> list[dict]:
    return [{"role": "user", "content": f"What is the weather like in {city}?"}]


def test_the_canonical_prompt_is_qwens_own_rendering(qwen_server, qwen_key):
    body = {"messages": [{"role": "system", "content": "You are a weather assistant."}, *ask_weather("Oslo")],
            "tools": [WEATHER]}
    preview = httpx.post(f"{qwen_server.api_base}/canonicalize", json=body, timeout=120,
                         headers={"Authorization": f"Bearer {qwen_key}"}).json()
    assert preview["rendered"].startswith("<|im_start|>system\nYou are a weather assistant.\n\n# Tools\n\n"
                                          "You may call one or more functions")
    assert f"<tools>\n{json.dumps(WEATHER)}\n</tools>" in preview["rendered"]
    # the client's order is canonical here, so Qwen's chat template (the raw render) gives the same tokens
    assert preview["num_tokens"] == preview["raw_num_tokens"]


def test_a_plain_question_gets_a_plain_answer(client):
    response = client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "What is the capital of France?"}],
        max_tokens=16, temperature=0)  # with a weather tool offered the 0.5B calls get_weather("Paris"): issue 43
    choice = response.choices[0]
    assert "Paris" in (choice.message.content or ""), choice.message
    assert not choice.message.tool_calls


def test_under_tool_choice_auto_the_weather_question_is_a_call_never_content(client):
    response = client.chat.completions.create(model="default", messages=ask_weather("Paris"), tools=[WEATHER],
                                              max_tokens=40, temperature=0)
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}


def test_a_streamed_auto_call_streams_no_markup(client):
    stream = client.chat.completions.create(model="default", messages=ask_weather("Lima"), tools=[WEATHER],
                                            max_tokens=40, temperature=0, stream=True)
    chunks = [chunk for chunk in stream if chunk.choices]
    content = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
    arguments = "".join(call.function.arguments or "" for chunk in chunks for call in chunk.choices[0].delta.tool_calls or [])
    assert not any(mark in content for mark in MARKUP)
    assert json.loads(arguments) == {"city": "Lima"} and chunks[-1].choices[0].finish_reason == "tool_calls"


def test_langchain_forced_tool_gets_a_call_naming_the_city(qwen_server, qwen_key):
    from langchain_openai import ChatOpenAI

    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return city

    llm = ChatOpenAI(base_url=qwen_server.api_base, api_key=qwen_key, model="default", temperature=0,
                     max_tokens=24, max_retries=0)
    reply = llm.bind_tools([get_weather], tool_choice="get_weather").invoke("What is the weather in Nairobi?")
    assert not any(mark in str(reply.content) for mark in MARKUP)
    (call,) = reply.tool_calls
    assert call["name"] == "get_weather" and call["args"] == {"city": "Nairobi"}


def test_a_forced_call_cut_by_max_tokens_says_length_with_the_arguments_so_far(client):
    response = client.chat.completions.create(model="default", messages=ask_weather("Reykjavik"), tools=[WEATHER],
                                              tool_choice=FORCED, max_tokens=9, temperature=0)
    choice = response.choices[0]
    assert choice.finish_reason == "length" and choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather" and '{"city": "Reykjavik"}'.startswith(call.function.arguments)


def test_json_schema_answers_complete_and_cut(client):
    def ask(max_tokens: int):
        return client.chat.completions.create(
            model="default", messages=[{"role": "user", "content": "Ada is 36. Give her name and age as JSON."}],
            response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}},
            max_tokens=max_tokens, temperature=0).choices[0]

    whole, cut = ask(40), ask(4)
    assert whole.finish_reason == "stop" and jsonschema.validate(json.loads(whole.message.content), PERSON) is None
    assert cut.finish_reason == "length" and whole.message.content.startswith(cut.message.content)


def test_responses_api_auto_call_is_a_function_call_item(client):
    tool = {"type": "function", **WEATHER["function"]}
    response = client.responses.create(model="default", input="What is the weather like in Tokyo?", tools=[tool],
                                       max_output_tokens=40, temperature=0)
    (item,) = response.output
    assert item.type == "function_call" and item.name == "get_weather"
    assert json.loads(item.arguments) == {"city": "Tokyo"} and response.status == "completed"
