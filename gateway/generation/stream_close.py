"""Closing a backend stream a run left unfinished: closing it aborts its request (routing/backend.py)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from gateway.routing.backend import Backend, BackendChunk

log = logging.getLogger(__name__)


async def close_quietly(stream: AsyncIterator[BackendChunk], backend: Backend | None, request_id: str) -> None:
    try:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
        elif backend is not None:
            backend.abort(request_id)
    except Exception:
        log.debug("closing backend stream %s raised", request_id, exc_info=True)
