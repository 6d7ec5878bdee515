"""The commands other threads put on the engine's inbox; the step thread applies them (EngineCore.handle).

Callers never touch the scheduler or the cache directly: Engine turns each call into one
of these, and the step thread applies it between steps, under the engine lock, in the
order the commands arrived. A command of any other type raises TypeError.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.request import Request


@dataclass(frozen=True)
class AddRequest:
    """Queue a validated request for scheduling (Engine.submit)."""

    request: Request


@dataclass(frozen=True)
class AbortRequest:
    """Abort a request wherever it is; an unknown or finished id is ignored (Engine.abort)."""

    request_id: str


@dataclass(frozen=True)
class CallOnStepThread:
    """Run ``fn()`` on the step thread, e.g. to start a pin's prefill (Engine.pin_future)."""

    fn: Callable[[], None]


@dataclass(frozen=True)
class Wake:
    """Does nothing: it only ends a blocked inbox read, so the loop sees a stop flag (Engine.shutdown)."""


Command = AddRequest | AbortRequest | CallOnStepThread | Wake
