"""Fleet endpoints: GET /v1/load and GET /kv_event_sources (what an edge gateway reads of this node)
and GET /admin/backends.

/v1/load: this gateway's queued + running work, the chats it has admitted and not finished and
their prompt tokens (any valid key; an edge reads it with the key it sends chats with).
/kv_event_sources: where this node's engine publishes its KV events (engine/kv_events.py; vLLM's
ZMQ format), with its start id (new at every start); `sources` is empty when it publishes none.
/admin/backends: each backend this gateway routes to, with its state (up, down, half_open),
failures, recoveries, in-flight requests and load (routing/router.Router.describe).
"""

from __future__ import annotations

from fastapi import APIRouter

from gateway.deps import AdminDep, CallerDep, StateDep
from gateway.routing.load import LOCAL_LOAD

router = APIRouter(tags=["fleet"])


@router.get("/v1/load")
def node_load(caller: CallerDep, gw: StateDep) -> dict:
    return {
        "requests_in_flight": gw.in_flight.num_in_flight.get(LOCAL_LOAD, 0),
        "tokens_in_flight": gw.in_flight.tokens_in_flight.get(LOCAL_LOAD, 0),
    }


@router.get("/kv_event_sources")
def kv_event_sources(caller: CallerDep, gw: StateDep) -> dict:
    source = gw.engine.kv_event_source() if gw.engine is not None else None
    return {"sources": [source] if source is not None else []}


@router.get("/admin/backends")
def backends(_: AdminDep, gw: StateDep) -> dict:
    describe = getattr(gw.router, "describe", None)
    return {
        "mode": gw.settings.routing.mode,
        "backends": describe() if describe is not None else [],
    }
