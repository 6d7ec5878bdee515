"""Server-Sent Events of one streamed message, in the order Anthropic sends them.

    event: message_start        {"message": {... "content": [], "stop_reason": null, "usage": {...}}}
    event: ping
    -- the text, when there is any --
    event: content_block_start  {"index": 0, "content_block": {"type": "text", "text": ""}}
    event: content_block_delta  {"index": 0, "delta": {"type": "text_delta", "text": "Hel"}}   ...
    event: content_block_stop   {"index": 0}
    -- each tool call --
    event: content_block_start  {"index": i, "content_block": {"type": "tool_use", "id", "name", "input": {}}}
    event: content_block_delta  {"index": i, "delta": {"type": "input_json_delta", "partial_json": "{\"ci"}}  ...
    event: content_block_stop   {"index": i}
    event: message_delta        {"delta": {"stop_reason", "stop_sequence"}, "usage": {cumulative figures}}
    event: message_stop

message_start's usage counts the whole prompt as input (what was read from the cache is known only
when the engine finishes); message_delta's usage carries every figure, cumulative, as Anthropic's
does, so a client that merges the two (the SDK's accumulator, Claude Code) ends with the true split.
Text streams as it comes unless it could be the start of a tool call (held, as for every wire
format: gateway/generation/tool_calls.py). An error after the 200 is one `error` event in
Anthropic's envelope, and the stream ends.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, AsyncIterator

from gateway.errors import from_exception
from gateway.generation.answer import answer_events
from gateway.generation.result import Answer, Usage
from gateway.messages.envelope import error_body
from gateway.messages.render import call_input, message_head, stop_reason, usage

if TYPE_CHECKING:
    from gateway.generation.result import ToolCall
    from gateway.generation.run import GenerationRun

log = logging.getLogger(__name__)

ARGUMENT_FRAGMENT_CHARS = 16


def event(kind: str, **fields) -> bytes:
    payload = {"type": kind, **fields}
    return f"event: {kind}\ndata: {json.dumps(payload, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


@dataclass
class Blocks:
    """Numbers the content blocks as they open; `is_text_open` while the text block takes deltas."""

    num_blocks: int = 0
    is_text_open: bool = False

    def open_text(self) -> bytes:
        self.is_text_open = True
        return event("content_block_start", index=self.num_blocks, content_block={"type": "text", "text": ""})

    def close_text(self) -> list[bytes]:
        if not self.is_text_open:
            return []
        self.is_text_open = False
        self.num_blocks += 1
        return [event("content_block_stop", index=self.num_blocks - 1)]

    def text(self, text: str) -> bytes:
        return event("content_block_delta", index=self.num_blocks, delta={"type": "text_delta", "text": text})

    def tool_use(self, call: ToolCall) -> list[bytes]:
        index, arguments = self.num_blocks, json.dumps(call_input(call), ensure_ascii=False)
        self.num_blocks += 1
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        frames = [event("content_block_start", index=index, content_block=block)]
        for start in range(0, len(arguments), ARGUMENT_FRAGMENT_CHARS):
            delta = {"type": "input_json_delta", "partial_json": arguments[start:start + ARGUMENT_FRAGMENT_CHARS]}
            frames.append(event("content_block_delta", index=index, delta=delta))
        return frames + [event("content_block_stop", index=index)]


async def stream_message(run: GenerationRun) -> AsyncIterator[bytes]:
    """The SSE byte stream of a started run; the run is finished whatever happens."""
    blocks = Blocks()
    try:
        prompt = run.prepared.num_prompt_tokens if run.prepared else 0
        yield event("message_start", message=message_head(run, usage(Usage(prompt, 0, 0))))
        yield event("ping")
        answer = None
        async for item in answer_events(run):
            if isinstance(item, Answer):  # always the last one
                answer = item
                continue
            if not blocks.is_text_open:
                yield blocks.open_text()
            yield blocks.text(item.text)
        if blocks.num_blocks == 0 and not blocks.is_text_open and not answer.tool_calls:
            yield blocks.open_text()  # an empty answer is still one (empty) text block
        for frame in blocks.close_text():
            yield frame
        for call in answer.tool_calls:
            for frame in blocks.tool_use(call):
                yield frame
        delta = {"stop_reason": stop_reason(answer), "stop_sequence": answer.stop_sequence}
        final_usage = usage(answer.usage)
        run.finish()  # the row is spooled before the client can see message_stop
        yield event("message_delta", delta=delta, usage=final_usage)
        yield event("message_stop")
    except Exception as exc:
        run.fail_from(exc)
        log.warning("message stream %s failed after it started: %r", run.request_id, exc)
        yield b"event: error\ndata: " + json.dumps(error_body(from_exception(exc).name_field(run.request.names))).encode() + b"\n\n"
    except BaseException as exc:
        run.fail_from(exc)
        raise
    finally:
        run.finish()
