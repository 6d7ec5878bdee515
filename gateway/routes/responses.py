"""The Responses API: POST /v1/responses (streaming or not), GET/DELETE /v1/responses/{id}, GET .../input_items.

The wire format is gateway/responses/ (its request path is the one every wire format shares,
gateway/generation/); stored responses are the caller's tenant's only: another tenant's id is a
404 like an unknown one.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from fastapi import APIRouter, Query, Request, Response

from gateway.deps import CallerDep, RequestPathDep, SessionFactoryDep, TenantDep
from gateway.generation.streaming_response import RunStreamingResponse
from gateway.insight.diagnosis_render import diagnosis_headers
from gateway.responses import service
from gateway.responses.schemas import DeletedResponse, InputItemList, ResponseObject, ResponsesRequest
from gateway.responses.streaming import stream_response

router = APIRouter(tags=["responses"])


@router.post("/v1/responses", response_model=None)
async def create_response(
    body: ResponsesRequest, caller: CallerDep, path: RequestPathDep, sessions: SessionFactoryDep, request: Request,
    response: Response,
) -> ResponseObject | RunStreamingResponse:
    """Generate a response; with `stream: true` the answer is Server-Sent Events of the Responses API."""
    started = await service.start_response(body, caller=caller, http_request=request, path=path, session_factory=sessions)
    run = started.run
    headers = run.rate_state.headers() if run.rate_state else {}
    if body.stream:  # the diagnosis as known before the first byte (without the engine's cached figure)
        return RunStreamingResponse(stream_response(started, session_factory=sessions), run,
                                    {**headers, **diagnosis_headers(run.diagnosis)})
    finished = await service.complete_response(started, session_factory=sessions)
    response.headers.update({**headers, **diagnosis_headers(run.cache_diagnosis())})
    return finished


@router.get("/v1/responses/{response_id}")
async def get_response(response_id: str, tenant: TenantDep, sessions: SessionFactoryDep) -> ResponseObject:
    return await asyncio.to_thread(service.get_response, sessions, tenant.id, response_id)


@router.delete("/v1/responses/{response_id}")
async def delete_response(response_id: str, tenant: TenantDep, sessions: SessionFactoryDep) -> DeletedResponse:
    return await asyncio.to_thread(service.delete_response, sessions, tenant.id, response_id)


@router.get("/v1/responses/{response_id}/input_items")
async def list_input_items(
    response_id: str, tenant: TenantDep, sessions: SessionFactoryDep,
    limit: int = Query(20, ge=1, le=100), order: Literal["asc", "desc"] = "desc", after: str | None = None,
) -> InputItemList:
    """The response's input items (its whole resolved conversation), newest first unless order=asc."""
    return await asyncio.to_thread(service.list_input_items, sessions, tenant.id, response_id, limit, order, after)
