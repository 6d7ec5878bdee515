"""A pin's parts held in memory: what it covers (PinSpec), this process's live pins (PinBook), its errors."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass, field
from typing import Any


class PinQuotaError(Exception):
    """The pin would take the tenant past its pin quota; the message carries the numbers."""


class PinTooShortError(ValueError):
    """The rendered prefix is shorter than one KV page, so there is nothing to pin."""


@dataclass(frozen=True)
class PinSpec:
    """What a pin covers: the static sections of a request, and the template that renders them."""

    system: str
    tools: list[dict] = field(default_factory=list)
    context: list[Any] = field(default_factory=list)
    template: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> PinSpec:
        return cls(**json.loads(text))


@dataclass
class LivePin:
    engine_pin_id: int
    num_hits_recorded: int = 0
    expiry: asyncio.Task | None = None


class PinBook:
    """This process's live pins: stored pin id -> engine pin id, hits already saved, TTL timer."""

    def __init__(self) -> None:
        self.live: dict[int, LivePin] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    def tenant_lock(self, tenant_id: int) -> asyncio.Lock:
        """The lock that serializes quota check + row commit for one tenant (event loop only)."""
        return self._locks.setdefault(tenant_id, asyncio.Lock())

    def add(self, pin_id: int, engine_pin_id: int) -> LivePin:
        self.live[pin_id] = LivePin(engine_pin_id)
        return self.live[pin_id]

    def remove(self, pin_id: int) -> LivePin | None:
        """Forget a pin (cancelling its timer unless that timer is the caller)."""
        live = self.live.pop(pin_id, None)
        if live is not None and live.expiry is not None and live.expiry is not asyncio.current_task():
            live.expiry.cancel()
        return live
