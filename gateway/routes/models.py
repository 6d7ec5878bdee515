"""GET /v1/models and GET /v1/models/{id}: the models this gateway serves."""

from __future__ import annotations

from fastapi import APIRouter

from gateway.chat.schemas import ModelCard, ModelList
from gateway.deps import StateDep, TenantDep
from gateway.errors import not_found

router = APIRouter(tags=["models"])


@router.get("/v1/models")
def list_models(gw: StateDep, _: TenantDep) -> ModelList:
    return ModelList(data=[ModelCard(id=model_id, created=gw.started_at) for model_id in gw.path.models.ids])


@router.get("/v1/models/{model_id:path}")
def get_model(model_id: str, gw: StateDep, _: TenantDep) -> ModelCard:
    if model_id not in gw.path.models.ids:
        raise not_found(f"The model {model_id!r} does not exist.", "model")
    return ModelCard(id=model_id, created=gw.started_at)
