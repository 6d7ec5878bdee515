"""Anthropic's Messages API: POST /v1/messages (streaming or not) and POST /v1/messages/count_tokens.

The wire format is gateway/messages/ (its request path is the one every wire format shares,
gateway/generation/); every error on these routes is in Anthropic's envelope
(gateway/messages/envelope.py). Clients send `anthropic-version` / `anthropic-beta` headers and
Claude Code `?beta=true`: all accepted, none needed. Auth: `x-api-key` or a bearer token.
"""

from __future__ import annotations

import asyncio
import uuid

from fastapi import APIRouter, Header, Request, Response
from fastapi.responses import JSONResponse

from gateway.errors import ApiError
from gateway.deps import CallerDep, PreparerDep, RequestPathDep, ServedModelsDep
from gateway.generation.answer import complete
from gateway.generation.streaming_response import RunStreamingResponse
from gateway.messages.parse import count_request, generation_request
from gateway.messages.render import message
from gateway.messages.schemas import CountTokensRequest, MessagesRequest
from gateway.messages.streaming import stream_message

router = APIRouter(tags=["messages"])

SessionHeader = Header(default=None, alias="X-Claude-Code-Session-Id")


@router.post("/v1/messages", response_model=None)
async def create_message(
    body: MessagesRequest, caller: CallerDep, path: RequestPathDep, request: Request, response: Response,
    session: str | None = SessionHeader,
) -> dict | RunStreamingResponse:
    """Generate a message; with `stream: true` the answer is Anthropic's Server-Sent Events."""
    run = await path.start(lambda: generation_request(body, session), model=body.model, caller=caller,
                           http_request=request, request_id=f"msg_{uuid.uuid4().hex}")
    headers = {**(run.rate_state.headers() if run.rate_state else {}), "request-id": run.request_id}
    if body.stream:
        return RunStreamingResponse(stream_message(run), run, headers)
    response.headers.update(headers)
    return message(run, await complete(run))


@router.post("/v1/messages/count_tokens", response_model=None)
async def count_tokens(
    body: CountTokensRequest, caller: CallerDep, preparer: PreparerDep, models: ServedModelsDep,
    session: str | None = SessionHeader,
) -> JSONResponse:
    """{"input_tokens": N}: the prompt tokens the same body would send to /v1/messages (N is the sum of its
    usage's input_tokens, cache_creation_input_tokens and cache_read_input_tokens)."""
    request = count_request(body, session)
    model_id = models.resolve(request.model)
    try:
        prepared = await asyncio.to_thread(preparer.prepare_for, request, tenant=caller.tenant, model_id=model_id)
    except ApiError as exc:  # an error about an internal field, named as the Messages API names it
        raise exc.name_field(request.names)
    return JSONResponse({"input_tokens": prepared.num_prompt_tokens})
