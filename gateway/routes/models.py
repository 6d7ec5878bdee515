"""GET /v1/models and GET /v1/models/{id}: the models this gateway serves.

OpenAI's list shape, or Anthropic's ({"data": [{"type": "model", "id", "display_name", "created_at"}],
"has_more", "first_id", "last_id"}) when the request carries an `anthropic-version` header, as
Anthropic's SDKs send on every call.
"""

from __future__ import annotations

from datetime import datetime, timezone

from fastapi import APIRouter, Request

from gateway.chat.schemas import ModelCard, ModelList
from gateway.deps import StateDep, TenantDep
from gateway.errors import not_found

router = APIRouter(tags=["models"])


def wants_anthropic(request: Request) -> bool:
    return "anthropic-version" in request.headers


def anthropic_model(model_id: str, created: int) -> dict:
    created_at = datetime.fromtimestamp(created, timezone.utc).isoformat().replace("+00:00", "Z")
    return {"type": "model", "id": model_id, "display_name": model_id, "created_at": created_at}


@router.get("/v1/models", response_model=None)
def list_models(gw: StateDep, _: TenantDep, request: Request) -> ModelList | dict:
    ids = gw.path.models.ids
    if wants_anthropic(request):
        return {"data": [anthropic_model(model_id, gw.started_at) for model_id in ids], "has_more": False,
                "first_id": ids[0] if ids else None, "last_id": ids[-1] if ids else None}
    return ModelList(data=[ModelCard(id=model_id, created=gw.started_at) for model_id in ids])


@router.get("/v1/models/{model_id:path}", response_model=None)
def get_model(model_id: str, gw: StateDep, _: TenantDep, request: Request) -> ModelCard | dict:
    if model_id not in gw.path.models.ids:
        raise not_found(f"The model {model_id!r} does not exist.", "model")
    if wants_anthropic(request):
        return anthropic_model(model_id, gw.started_at)
    return ModelCard(id=model_id, created=gw.started_at)
