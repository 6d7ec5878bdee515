"""POST /v1/chat/completions: OpenAI-compatible, streaming or not. The request path lives in gateway/chat/service.py."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from gateway.chat import service as chat_service
from gateway.chat.run_stream import RunStreamingResponse
from gateway.chat.schemas import ChatCompletion, ChatCompletionRequest
from gateway.deps import CallerDep, StateDep

router = APIRouter(tags=["chat"])


@router.post("/v1/chat/completions", response_model=None)
async def create_chat_completion(
    body: ChatCompletionRequest, caller: CallerDep, gw: StateDep, request: Request, response: Response
) -> ChatCompletion | RunStreamingResponse:
    """Canonicalize, generate and answer; with `stream: true` the answer is Server-Sent Events.
    Both carry the tenant's x-ratelimit-* headers when it has per-minute limits."""
    run = await chat_service.start_chat(gw, caller, body, request)
    headers = run.rate_state.headers() if run.rate_state else {}
    if body.stream:
        return RunStreamingResponse(chat_service.stream_events(run), run, headers)
    response.headers.update(headers)
    return await chat_service.complete(run)
