"""One Responses request, top-down: resolve the chain -> the chat request -> the chat path -> response -> store.

    started = await start_response(gw, caller, body, request)   # errors here become HTTP errors (400/404/429/503)
    response = await complete_response(gw, started)             # or: responses.streaming.stream_response(gw, started)

`start_response` rebuilds the conversation: the previous response's stored
input items and output items (404 when the tenant has no such response), then
this request's input. It converts that into the internal chat request
(gateway/responses/to_chat.py) and starts it on the chat path
(gateway/chat/service.py: admission, canonicalization, templates, pins,
routing, request log, stats), so both wire formats share one request path.
A response is stored (`store`, default true) only once its generation has
finished: a failed generation leaves no row.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.chat import service as chat_service
from gateway.db.session import session_scope
from gateway.errors import ApiError, not_found
from gateway.responses import store
from gateway.responses.items import normalize_input, output_items
from gateway.responses.render import ResponseTurn, status_of
from gateway.responses.to_chat import to_chat_request

if TYPE_CHECKING:
    from fastapi import Request

    from gateway.chat.run import ChatRun
    from gateway.deps import Caller
    from gateway.responses.schemas import DeletedResponse, InputItemList, ResponseObject, ResponsesRequest
    from gateway.state import GatewayState


@dataclass(frozen=True)
class StartedResponse:
    turn: ResponseTurn
    run: ChatRun
    tenant_id: int
    chain_id: str | None  # the conversation this turn continues (None: it starts one)


def new_response_id() -> str:
    return f"resp_{uuid.uuid4().hex}"


async def start_response(gw: GatewayState, caller: Caller, body: ResponsesRequest, request: Request | None) -> StartedResponse:
    """Resolve the conversation and start its generation on the chat path. Raises ApiError."""
    tenant_id = caller.tenant.id
    previous, chain_id = await asyncio.to_thread(load_conversation, gw, tenant_id, body.previous_response_id)
    items = [*previous, *normalize_input(body.input)]
    chat_body = to_chat_request(body, items)
    response_id = new_response_id()
    try:  # every turn of a conversation routes by its chain (unless the client names a cache key)
        run = await chat_service.start_chat(gw, caller, chat_body, request, response_id,
                                            route_key=f"response-chain:{chain_id or response_id}")
    except ApiError as exc:
        renamed = responses_param(exc.param)
        if renamed != exc.param:
            exc.message, exc.param = exc.message.replace(exc.param, renamed), renamed
        raise
    turn = ResponseTurn(response_id, body, items, run.model_id, run.created)
    return StartedResponse(turn, run, tenant_id, chain_id)


CHAT_PARAMS = (  # the chat request's field names in a 400, as the Responses request spells them
    (re.compile(r"^response_format\.json_schema\.schema"), "text.format.schema"),
    (re.compile(r"^response_format(\.json_schema)?"), "text.format"),
    (re.compile(r"^(tools\[\d+\])\.function\.parameters"), r"\1.parameters"),
    (re.compile(r"^max_completion_tokens$"), "max_output_tokens"),
    (re.compile(r"^messages$"), "input"),
)


def responses_param(param: str | None) -> str | None:
    """A chat-path error's `param` renamed to the Responses field it came from."""
    for pattern, replacement in CHAT_PARAMS if param else ():
        renamed, count = pattern.subn(replacement, param)
        if count:
            return renamed
    return param


def load_conversation(gw: GatewayState, tenant_id: int, previous_response_id: str | None
                      ) -> tuple[list[dict], str | None]:
    """The items a turn chained to `previous_response_id` continues and that chain's id (([], None)
    without one); 404 when not the tenant's."""
    if previous_response_id is None:
        return [], None
    with session_scope(gw.session_factory) as session:
        turn = store.load_turn(session, tenant_id, previous_response_id)
    if turn is None:
        raise previous_not_found(previous_response_id)
    return turn.conversation(), turn.chain_id


def previous_not_found(response_id: str) -> ApiError:
    error = not_found(f"Previous response with id {response_id!r} not found.", "previous_response_id")
    error.code = "previous_response_not_found"
    return error


async def complete_response(gw: GatewayState, started: StartedResponse) -> ResponseObject:
    """Drain the generation (the chat path's `complete`), build the response, store it when asked."""
    completion = await chat_service.complete(started.run)
    choice = completion.choices[0]
    calls = choice.message.tool_calls
    status = "completed" if calls else status_of(choice.finish_reason)
    output = output_items(choice.message.content or "", calls, status)
    response = started.turn.response(status, output, completion.usage)
    await save(gw, started, response)
    return response


async def save(gw: GatewayState, started: StartedResponse, response: ResponseObject) -> None:
    """Store the finished response with its resolved input items, unless the request said store: false."""
    if started.turn.body.store is False:
        return

    def write() -> None:
        with session_scope(gw.session_factory) as session:
            store.save_response(session, started.tenant_id, response, started.turn.input_items, started.chain_id)

    await asyncio.to_thread(write)


def get_response(gw: GatewayState, tenant_id: int, response_id: str) -> ResponseObject:
    return load_turn_or_404(gw, tenant_id, response_id).response


def list_input_items(gw: GatewayState, tenant_id: int, response_id: str, limit: int, order: str,
                     after: str | None) -> InputItemList:
    turn = load_turn_or_404(gw, tenant_id, response_id)
    page = store.page_items(turn.input_items, limit, order, after)
    if page is None:
        raise not_found(f"No input item with id {after!r} in response {response_id!r}.", "after")
    return page


def delete_response(gw: GatewayState, tenant_id: int, response_id: str) -> DeletedResponse:
    from gateway.responses.schemas import DeletedResponse

    with session_scope(gw.session_factory) as session:
        deleted = store.delete_response(session, tenant_id, response_id)
    if not deleted:
        raise response_not_found(response_id)
    return DeletedResponse(id=response_id)


def load_turn_or_404(gw: GatewayState, tenant_id: int, response_id: str) -> store.Turn:
    with session_scope(gw.session_factory) as session:
        turn = store.load_turn(session, tenant_id, response_id)
    if turn is None:
        raise response_not_found(response_id)
    return turn


def response_not_found(response_id: str) -> ApiError:
    return not_found(f"Response with id {response_id!r} not found.", "response_id")
