"""POST /v1/chat/completions: OpenAI-compatible, streaming or not. The request path lives in gateway/chat/service.py."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from gateway.chat import service as chat_service
from gateway.chat.schemas import ChatCompletion, ChatCompletionRequest
from gateway.chat.streaming import SSE_HEADERS
from gateway.deps import CallerDep, StateDep

router = APIRouter(tags=["chat"])


@router.post("/v1/chat/completions", response_model=None)
async def create_chat_completion(
    body: ChatCompletionRequest, caller: CallerDep, gw: StateDep, request: Request
) -> ChatCompletion | StreamingResponse:
    """Canonicalize, generate and answer; with `stream: true` the answer is Server-Sent Events."""
    run = await chat_service.start_chat(gw, caller, body, request)
    if body.stream:
        return StreamingResponse(chat_service.stream_events(run), media_type="text/event-stream", headers=SSE_HEADERS)
    return await chat_service.complete(run)
