"""POST /v1/chat/completions: OpenAI-compatible, streaming or not. The wire format is gateway/chat/;
the request path it shares with every other wire format is gateway/generation/."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from gateway.chat.parse import generation_request
from gateway.chat.render import chat_completion
from gateway.chat.schemas import ChatCompletion, ChatCompletionRequest
from gateway.chat.streaming import stream_events
from gateway.deps import CallerDep, RequestPathDep
from gateway.generation.answer import complete
from gateway.generation.streaming_response import RunStreamingResponse
from gateway.insight.diagnosis_render import diagnosis_headers

router = APIRouter(tags=["chat"])


@router.post("/v1/chat/completions", response_model=None)
async def create_chat_completion(
    body: ChatCompletionRequest, caller: CallerDep, path: RequestPathDep, request: Request, response: Response
) -> ChatCompletion | RunStreamingResponse:
    """Canonicalize, generate and answer; with `stream: true` the answer is Server-Sent Events.
    Both carry the tenant's x-ratelimit-* headers when it has per-minute limits."""
    run = await path.start(lambda: generation_request(body), model=body.model, caller=caller, http_request=request)
    headers = run.rate_state.headers() if run.rate_state else {}
    if body.stream:  # the diagnosis as known before the first byte (without the engine's cached figure)
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return RunStreamingResponse(stream_events(run, include_usage), run, {**headers, **diagnosis_headers(run.diagnosis)})
    answer = await complete(run)
    response.headers.update({**headers, **diagnosis_headers(run.cache_diagnosis())})
    return chat_completion(run, answer)
