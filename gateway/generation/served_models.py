"""ServedModels: which model ids this gateway serves, and which one a request's `model` names.

The served ids are the backends' models, the embedded engine's first, then each
remote's in settings order. `resolve` also accepts the aliases in MODEL_ALIASES and
the configured engine model spec (e.g. a path or GGUF name) for the first served id.
Used by every wire format, /v1/canonicalize and /v1/models.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.errors import not_found

MODEL_ALIASES = ("default",)


@dataclass(frozen=True)
class ServedModels:
    ids: tuple[str, ...]  # embedded first, then each remote's model once
    engine_spec: str  # the configured engine model (settings.engine.model), an alias of the first id

    @classmethod
    def of(cls, embedded_model_id: str | None, remote_models: list[str], engine_spec: str) -> ServedModels:
        ids = [embedded_model_id] if embedded_model_id is not None else []
        ids += [model for model in remote_models if model not in ids]
        return cls(tuple(ids), engine_spec)

    def resolve(self, requested: str) -> str:
        """The served model id for the name a client sent; 404 for models we do not serve."""
        if requested in self.ids:
            return requested
        if self.ids and (requested in MODEL_ALIASES or requested == self.engine_spec):
            return self.ids[0]
        raise not_found(f"The model {requested!r} does not exist; this gateway serves {list(self.ids)}.", "model")
