"""One Responses request, top-down: resolve the chain -> the internal request -> the request path -> response -> store.

    started = await start_response(body, caller=..., http_request=..., path=..., session_factory=...)
    response = await complete_response(started, session_factory=...)   # or: streaming.stream_response(...)

`start_response` rebuilds the conversation: the previous response's stored
input items and output items (404 when the tenant has no such response), then
this request's input. It parses that into the internal GenerationRequest
(gateway/responses/parse.py) and starts it on the one request path
(gateway/generation/: admission, canonicalization, templates, pins, routing,
request log, stats), which every wire format shares. A response is stored
(`store`, default true) only once its generation has finished: a failed
generation leaves no row.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.db.session import session_scope
from gateway.errors import ApiError, not_found
from gateway.generation.answer import complete
from gateway.responses import store
from gateway.responses.items import normalize_input, output_items
from gateway.responses.parse import generation_request
from gateway.responses.render import ResponseTurn, asked_diagnostics, response_status

if TYPE_CHECKING:
    from fastapi import Request
    from sqlalchemy.orm import Session, sessionmaker

    from gateway.deps import Caller
    from gateway.generation.path import RequestPath
    from gateway.generation.run import GenerationRun
    from gateway.responses.schemas import DeletedResponse, InputItemList, ResponseObject, ResponsesRequest


@dataclass(frozen=True)
class StartedResponse:
    turn: ResponseTurn
    run: GenerationRun
    tenant_id: int
    chain_id: str | None  # the conversation this turn continues (None: it starts one)


def new_response_id() -> str:
    return f"resp_{uuid.uuid4().hex}"


async def start_response(body: ResponsesRequest, *, caller: Caller, http_request: Request | None, path: RequestPath,
                         session_factory: sessionmaker[Session]) -> StartedResponse:
    """Resolve the conversation and start its generation on the request path. Raises ApiError."""
    tenant_id = caller.tenant.id
    previous, chain_id = await asyncio.to_thread(load_conversation, session_factory, tenant_id, body.previous_response_id)
    items = [*previous, *normalize_input(body.input)]
    response_id = new_response_id()
    # every turn of a conversation routes by its chain (unless the client names a cache key)
    chain_key = f"response-chain:{chain_id or response_id}"
    run = await path.start(lambda: generation_request(body, items, chain_key), model=body.model, caller=caller,
                           http_request=http_request, request_id=response_id)
    turn = ResponseTurn(response_id, body, items, run.model_id, run.created)
    return StartedResponse(turn, run, tenant_id, chain_id)


def load_conversation(session_factory: sessionmaker[Session], tenant_id: int, previous_response_id: str | None
                      ) -> tuple[list[dict], str | None]:
    """The items a turn chained to `previous_response_id` continues and that chain's id (([], None)
    without one); 404 when not the tenant's."""
    if previous_response_id is None:
        return [], None
    with session_scope(session_factory) as session:
        turn = store.load_turn(session, tenant_id, previous_response_id)
    if turn is None:
        raise previous_not_found(previous_response_id)
    return turn.conversation(), turn.chain_id


def previous_not_found(response_id: str) -> ApiError:
    error = not_found(f"Previous response with id {response_id!r} not found.", "previous_response_id")
    error.code = "previous_response_not_found"
    return error


async def complete_response(started: StartedResponse, *, session_factory: sessionmaker[Session]) -> ResponseObject:
    """Drain the generation, build the response, store it when asked."""
    answer = await complete(started.run)
    status = response_status(answer)
    output = output_items(answer.text, answer.tool_calls, status)
    response = asked_diagnostics(started.turn.response(status, output, answer.usage), started.run)
    await save(started, response, session_factory=session_factory)
    return response


async def save(started: StartedResponse, response: ResponseObject, *, session_factory: sessionmaker[Session]) -> None:
    """Store the finished response with its resolved input items, unless the request said store: false."""
    if started.turn.body.store is False:
        return

    def write() -> None:
        with session_scope(session_factory) as session:
            store.save_response(session, started.tenant_id, response, started.turn.input_items, started.chain_id)

    await asyncio.to_thread(write)


def get_response(session_factory: sessionmaker[Session], tenant_id: int, response_id: str) -> ResponseObject:
    return load_turn_or_404(session_factory, tenant_id, response_id).response


def list_input_items(session_factory: sessionmaker[Session], tenant_id: int, response_id: str, limit: int, order: str,
                     after: str | None) -> InputItemList:
    turn = load_turn_or_404(session_factory, tenant_id, response_id)
    page = store.page_items(turn.input_items, limit, order, after)
    if page is None:
        raise not_found(f"No input item with id {after!r} in response {response_id!r}.", "after")
    return page


def delete_response(session_factory: sessionmaker[Session], tenant_id: int, response_id: str) -> DeletedResponse:
    from gateway.responses.schemas import DeletedResponse

    with session_scope(session_factory) as session:
        deleted = store.delete_response(session, tenant_id, response_id)
    if not deleted:
        raise response_not_found(response_id)
    return DeletedResponse(id=response_id)


def load_turn_or_404(session_factory: sessionmaker[Session], tenant_id: int, response_id: str) -> store.Turn:
    with session_scope(session_factory) as session:
        turn = store.load_turn(session, tenant_id, response_id)
    if turn is None:
        raise response_not_found(response_id)
    return turn


def response_not_found(response_id: str) -> ApiError:
    return not_found(f"Response with id {response_id!r} not found.", "response_id")
