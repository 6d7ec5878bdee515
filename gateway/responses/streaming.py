"""Server-Sent Events of one streamed response, in the order OpenAI sends them.

    event: response.created            {"response": {... "status": "in_progress"}}
    event: response.in_progress
    -- a text answer --
    event: response.output_item.added  {"item": {"type": "message", "status": "in_progress", "content": []}}
    event: response.content_part.added {"part": {"type": "output_text", "text": ""}}
    event: response.output_text.delta  {"delta": "Hel"}   ...
    event: response.output_text.done   {"text": "Hello"}
    event: response.content_part.done
    event: response.output_item.done
    -- each tool call --
    event: response.output_item.added  {"item": {"type": "function_call", "arguments": ""}}
    event: response.function_call_arguments.delta / .done
    event: response.output_item.done
    event: response.completed          (response.incomplete when cut by max_output_tokens)

Every event's data carries its `type` and a `sequence_number` counting up from
0. Text streams token by token unless it could be the start of a tool call
(then it is held, as for chat completions, gateway/generation/tool_calls.py). The
response is stored before the final event is sent, so a client may chain to it
as soon as it sees response.completed. An error after the stream started is
one response.failed event (nothing stored).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, AsyncIterator

from gateway.errors import from_exception
from gateway.generation.answer import answer_events
from gateway.generation.result import Answer
from gateway.responses.items import message_item, new_item_id, output_items, text_part
from gateway.responses.render import asked_diagnostics, response_status
from gateway.responses.service import save

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from gateway.responses.schemas import ResponseObject
    from gateway.responses.service import StartedResponse

log = logging.getLogger(__name__)


@dataclass
class EventWriter:
    """Frames events and numbers them; `output` collects the finished output items in order."""

    sequence_number: int = 0
    output: list[dict] = field(default_factory=list)

    def event(self, kind: str, **fields) -> bytes:
        payload = {"type": kind, "sequence_number": self.sequence_number, **fields}
        self.sequence_number += 1
        return f"event: {kind}\ndata: {json.dumps(payload, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()

    def lifecycle(self, kind: str, response: ResponseObject) -> bytes:
        return self.event(kind, response=response.model_dump(mode="json"))


@dataclass
class OpenMessage:
    """The assistant message being streamed: its id, position and text so far."""

    item_id: str
    output_index: int
    text: str = ""

    def where(self) -> dict:
        return {"item_id": self.item_id, "output_index": self.output_index, "content_index": 0}


def open_message(events: EventWriter) -> tuple[OpenMessage, list[bytes]]:
    message = OpenMessage(new_item_id("message"), len(events.output))
    item = {**message_item("", "in_progress", message.item_id), "content": []}
    return message, [
        events.event("response.output_item.added", output_index=message.output_index, item=item),
        events.event("response.content_part.added", **message.where(), part=text_part("output_text", "")),
    ]


def text_delta(events: EventWriter, message: OpenMessage, text: str) -> bytes:
    message.text += text
    return events.event("response.output_text.delta", **message.where(), delta=text, logprobs=[])


def close_message(events: EventWriter, message: OpenMessage, status: str) -> list[bytes]:
    item = message_item(message.text, status, message.item_id)
    events.output.append(item)
    return [
        events.event("response.output_text.done", **message.where(), text=message.text, logprobs=[]),
        events.event("response.content_part.done", **message.where(), part=item["content"][0]),
        events.event("response.output_item.done", output_index=message.output_index, item=item),
    ]


def call_events(events: EventWriter, call_item: dict) -> list[bytes]:
    index = len(events.output)
    events.output.append(call_item)
    where = {"item_id": call_item["id"], "output_index": index}
    return [
        events.event("response.output_item.added", output_index=index,
                     item={**call_item, "arguments": "", "status": "in_progress"}),
        events.event("response.function_call_arguments.delta", **where, delta=call_item["arguments"]),
        events.event("response.function_call_arguments.done", **where, arguments=call_item["arguments"],
                     name=call_item["name"]),
        events.event("response.output_item.done", output_index=index, item=call_item),
    ]


async def stream_response(started: StartedResponse, *, session_factory: sessionmaker[Session]) -> AsyncIterator[bytes]:
    """The SSE byte stream of a started response; the run is finished whatever happens."""
    run, turn = started.run, started.turn
    events = EventWriter()
    message, answer = None, None
    try:
        yield events.lifecycle("response.created", turn.response("in_progress"))
        yield events.lifecycle("response.in_progress", turn.response("in_progress"))
        async for event in answer_events(run):
            if isinstance(event, Answer):  # always the last event
                answer = event
                continue
            if message is None:
                message, opening = open_message(events)
                for frame in opening:
                    yield frame
            yield text_delta(events, message, event.text)
        status = response_status(answer)
        if message is None and not answer.tool_calls:  # an empty answer is still one (empty) message
            message, opening = open_message(events)
            for frame in opening:
                yield frame
        for frame in close_message(events, message, status) if message is not None else []:
            yield frame
        for call_item in output_items("", answer.tool_calls) if answer.tool_calls else []:
            for frame in call_events(events, call_item):
                yield frame
        response = asked_diagnostics(turn.response(status, events.output, answer.usage), run)
        await save(started, response, session_factory=session_factory)
        run.finish()  # the row is spooled before the client can see the final event
        yield events.lifecycle("response.incomplete" if status == "incomplete" else "response.completed", response)
    except Exception as exc:
        run.fail_from(exc)
        log.warning("response stream %s failed after it started: %r", turn.response_id, exc)
        error = from_exception(exc).name_field(run.request.names)
        yield events.lifecycle("response.failed", turn.response(
            "failed", events.output, run.api_usage(), {"code": error.code or "server_error", "message": error.message}))
    except BaseException as exc:
        run.fail_from(exc)
        raise
    finally:
        run.finish()
