"""The Responses API: POST /v1/responses (streaming or not), GET/DELETE /v1/responses/{id}, GET .../input_items.

The request path lives in gateway/responses/service.py (it shares the chat path); stored
responses are the caller's tenant's only: another tenant's id is a 404 like an unknown one.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from fastapi import APIRouter, Query, Request, Response

from gateway.chat.run_stream import RunStreamingResponse
from gateway.deps import CallerDep, StateDep, TenantDep
from gateway.responses import service
from gateway.responses.schemas import DeletedResponse, InputItemList, ResponseObject, ResponsesRequest
from gateway.responses.streaming import stream_response

router = APIRouter(tags=["responses"])


@router.post("/v1/responses", response_model=None)
async def create_response(
    body: ResponsesRequest, caller: CallerDep, gw: StateDep, request: Request, response: Response
) -> ResponseObject | RunStreamingResponse:
    """Generate a response; with `stream: true` the answer is Server-Sent Events of the Responses API."""
    started = await service.start_response(gw, caller, body, request)
    run = started.run
    headers = run.rate_state.headers() if run.rate_state else {}
    if body.stream:
        return RunStreamingResponse(stream_response(gw, started), run, headers)
    response.headers.update(headers)
    return await service.complete_response(gw, started)


@router.get("/v1/responses/{response_id}")
async def get_response(response_id: str, tenant: TenantDep, gw: StateDep) -> ResponseObject:
    return await asyncio.to_thread(service.get_response, gw, tenant.id, response_id)


@router.delete("/v1/responses/{response_id}")
async def delete_response(response_id: str, tenant: TenantDep, gw: StateDep) -> DeletedResponse:
    return await asyncio.to_thread(service.delete_response, gw, tenant.id, response_id)


@router.get("/v1/responses/{response_id}/input_items")
async def list_input_items(
    response_id: str, tenant: TenantDep, gw: StateDep,
    limit: int = Query(20, ge=1, le=100), order: Literal["asc", "desc"] = "desc", after: str | None = None,
) -> InputItemList:
    """The response's input items (its whole resolved conversation), newest first unless order=asc."""
    return await asyncio.to_thread(service.list_input_items, gw, tenant.id, response_id, limit, order, after)
