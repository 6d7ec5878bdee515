"""Model resolution: which model ids this gateway serves, and which one a request's `model` names.

The served ids are the backends' models, the embedded engine's first, then each
remote's in settings order. `resolve_model` also accepts the aliases in
MODEL_ALIASES and the configured engine model spec (e.g. a path or GGUF name)
for the first served id. Used by /v1/chat/completions, /v1/canonicalize and /v1/models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.errors import not_found

if TYPE_CHECKING:
    from gateway.state import GatewayState

MODEL_ALIASES = ("default",)


def served_model_ids(gw: GatewayState) -> list[str]:
    """Model ids clients may name: the backends' models (embedded first)."""
    ids = [gw.engine.model_id] if gw.engine is not None else []
    ids += [remote.model for remote in gw.settings.remotes if remote.model not in ids]
    return ids


def resolve_model(gw: GatewayState, requested: str) -> str:
    """The served model id for the name a client sent; 404 for models we do not serve."""
    ids = served_model_ids(gw)
    if requested in ids:
        return requested
    if ids and (requested in MODEL_ALIASES or requested == gw.settings.engine.model):
        return ids[0]
    raise not_found(f"The model {requested!r} does not exist; this gateway serves {ids}.", "model")
