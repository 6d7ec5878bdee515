"""EngineSettings: the embedded engine's knobs, every one an EngineConfig field with EngineConfig's own type
and default (engine/config.py is the one source of both), plus the gateway's own `enabled` and
`tenant_weights`. An unknown key is an error naming it; so is a value EngineConfig rejects.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from pydantic import Field, create_model, model_validator

from engine.config import EngineConfig  # stdlib only: the settings never pull torch in
from gateway.settings.sections import StrictModel

# each engine knob's description in the settings schema; its type and default are EngineConfig's own
# (engine/config.py documents each)
ENGINE_HELP = {
    "quantization": "none | int8 | int4 (weight-only) | w4a8 (int4 weights, int8 activations) | w8a8 | auto (the "
                    "weight-only mode the CPU's probe times faster at decode).",
    "prefer": "speed | accuracy: what an auto dtype / quantization favours; accuracy runs the float32 model.",
    "policy": "Waiting-queue order: fair (across tenants, longest cached prefix first within one), lpm, dfs-weight "
              "or fcfs.",
    "max_queue_wait_s": "Longest a request waits before it is first scheduled; past it: 503 with Retry-After.",
    "fair_cached_token_cost": "Under the fair policy, what a cached prompt token costs a tenant relative to a "
                              "computed one (0..1).",
    "speculative_tokens": "Prompt-lookup speculation: drafts per greedy decode step, verified exactly (0: off).",
    "speculative_max_batch": "Speculate only in steps decoding at most this many sequences.",
    "max_pinned_fraction": "The share of the KV pool all pins may hold together.",
    "host_tier_tokens": "Host KV tier size in tokens (0 with host_tier_bytes 0: off).",
    "host_tier_bytes": "Host KV tier size in bytes (wins over host_tier_tokens).",
    "host_tier_name": "Gateways on one machine given the same name share one shared-memory store.",
    "native_kernels": "Run radixgate's native CPU kernels where they build (false: torch's kernels run every row). "
                      "Also RADIXGATE_NATIVE_KERNELS.",
    "cache_dir": "radixgate's cache directory; GGUF models are dequantized under <cache_dir>/models "
                 "(default ~/.cache/radixgate). Also RADIXGATE_CACHE_DIR.",
}


def engine_field(field: dataclasses.Field, annotation: Any) -> tuple[Any, Any]:
    """A pydantic field for one EngineConfig field: its type and its default, nothing restated."""
    default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
    return annotation, Field(default=default, description=ENGINE_HELP.get(field.name))


ENGINE_HINTS = typing.get_type_hints(EngineConfig)
ENGINE_FIELDS = {f.name: engine_field(f, ENGINE_HINTS[f.name]) for f in dataclasses.fields(EngineConfig)}


class EngineSettingsBase(StrictModel):
    """The gateway's own engine settings; EngineSettings adds every EngineConfig field with its default.

    A None for a field whose engine default is not None means that default (a flag left unset). The
    values are checked by building the EngineConfig, so a value the engine rejects fails here, naming it.
    """

    enabled: bool = True
    # each tenant's share of the engine under the fair policy, by tenant name; a tenant not listed has 1.0
    tenant_weights: dict[str, float] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _none_means_the_engine_default(cls, values: Any) -> Any:
        if not isinstance(values, dict):
            return values
        defaults = {name: spec[1].default for name, spec in ENGINE_FIELDS.items()}
        return {k: v for k, v in values.items() if not (v is None and defaults.get(k, None) is not None)}

    @model_validator(mode="after")
    def _engine_accepts_them(self) -> EngineSettingsBase:
        self.to_engine_config()
        return self

    def to_engine_config(self) -> EngineConfig:
        """The engine's frozen EngineConfig: every engine field, as set here."""
        return EngineConfig(**{name: getattr(self, name) for name in ENGINE_FIELDS})


EngineSettings = create_model("EngineSettings", __base__=EngineSettingsBase, __module__=__name__, **ENGINE_FIELDS)
