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
from dataclasses import dataclass

from gateway.chat.schemas import ChatCompletionChunk, ChunkChoice, ChunkDelta, Usage

DONE_EVENT = b"data: [DONE]\n\n"
ARGUMENT_FRAGMENT_CHARS = 16
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


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
