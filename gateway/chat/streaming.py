"""Server-Sent Events exactly as OpenAI sends them for chat completions.

    data: {"id": ..., "object": "chat.completion.chunk", "choices": [{"delta": {"role": "assistant", "content": ""}}]}\n\n
    data: {... "choices": [{"delta": {"content": "Hel"}}]}\n\n
    ...
    data: {... "choices": [{"delta": {}, "finish_reason": "stop"}]}\n\n
    data: {... "choices": [], "usage": {...}}\n\n        <- only with stream_options.include_usage
    data: [DONE]\n\n

A tool call streams as OpenAI's do: a chunk with the call's index, id and name,
then chunks with argument fragments (see ChunkFactory.tool_calls).

With include_usage every chunk carries `"usage": null` except the last one,
as OpenAI does. An error after the stream started is sent as one
`data: {"error": {...}}` event, then [DONE].
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, AsyncIterator

from gateway.chat.render import chat_usage, openai_tool_calls
from gateway.chat.schemas import ChatCompletionChunk, ChunkChoice, ChunkDelta, Usage
from gateway.errors import from_exception
from gateway.generation.answer import answer_events
from gateway.generation.result import Answer

if TYPE_CHECKING:
    from gateway.generation.run import GenerationRun

log = logging.getLogger(__name__)

DONE_EVENT = b"data: [DONE]\n\n"
ARGUMENT_FRAGMENT_CHARS = 16


def encode_event(payload: dict) -> bytes:
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


@dataclass(frozen=True)
class ChunkFactory:
    """Builds the chunks of one streamed completion (same id, created and model on each)."""

    completion_id: str
    created: int
    model: str
    include_usage: bool

    def _event(self, choices: list[ChunkChoice], usage: Usage | None = None) -> bytes:
        chunk = ChatCompletionChunk(id=self.completion_id, created=self.created, model=self.model, choices=choices, usage=usage)
        payload = chunk.model_dump(exclude={"usage"} if not self.include_usage else set())
        for choice in payload["choices"]:
            choice["delta"] = {k: v for k, v in choice["delta"].items() if v is not None}
        return encode_event(payload)

    def role(self) -> bytes:
        return self._event([ChunkChoice(delta=ChunkDelta(role="assistant", content=""))])

    def content(self, text: str) -> bytes:
        return self._event([ChunkChoice(delta=ChunkDelta(content=text))])

    def tool_calls(self, calls: list[dict]) -> list[bytes]:
        """OpenAI's shape: per call, one chunk with index, id, type and name (arguments ""), then the
        arguments in fragments (chunks with only index and function.arguments)."""
        events = []
        for index, call in enumerate(calls):
            head = {"index": index, "id": call["id"], "type": "function",
                    "function": {"name": call["function"]["name"], "arguments": ""}}
            events.append(self._event([ChunkChoice(delta=ChunkDelta(tool_calls=[head]))]))
            arguments = call["function"]["arguments"]
            for start in range(0, len(arguments), ARGUMENT_FRAGMENT_CHARS):
                fragment = {"index": index, "function": {"arguments": arguments[start:start + ARGUMENT_FRAGMENT_CHARS]}}
                events.append(self._event([ChunkChoice(delta=ChunkDelta(tool_calls=[fragment]))]))
        return events

    def finish(self, finish_reason: str) -> bytes:
        return self._event([ChunkChoice(delta=ChunkDelta(), finish_reason=finish_reason)])

    def usage(self, usage: Usage) -> bytes:
        return self._event([], usage)


def error_event(body: dict) -> bytes:
    return encode_event(body)


async def stream_events(run: GenerationRun, include_usage: bool) -> AsyncIterator[bytes]:
    """The SSE byte stream for a started run; always ends with [DONE] unless the client left."""
    factory = ChunkFactory(run.request_id, run.created, run.model_id, include_usage)
    try:
        yield factory.role()
        async for event in answer_events(run):
            if not isinstance(event, Answer):
                yield factory.content(event.text)
                continue
            for frame in factory.tool_calls(openai_tool_calls(event.tool_calls) or []):
                yield frame
            yield factory.finish(event.finish_reason)
            if include_usage:
                yield factory.usage(chat_usage(event.usage))
        run.finish()  # the row is spooled before the client can see [DONE]
        yield DONE_EVENT
    except Exception as exc:
        run.fail_from(exc)
        log.warning("stream %s failed after it started: %r", run.request_id, exc)
        yield error_event(from_exception(exc).name_field(run.request.names).body())
        yield DONE_EVENT
    except BaseException as exc:
        run.fail_from(exc)
        raise
    finally:
        run.finish()
