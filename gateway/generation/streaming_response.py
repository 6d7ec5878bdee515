"""RunStreamingResponse: an SSE response that finishes its GenerationRun however the client leaves.

A StreamingResponse runs its body generator only once headers are sent. If `send`
raises before that (the client left before headers), the generator never starts, so
its `finally` never runs; if the client disconnects mid-stream, Starlette cancels the
generator's task and leaves the suspended generator to the garbage collector. Either
way the run's `finish` (slot release, the request-log row) would wait or never happen.

Contract: when `__call__` returns or raises, the run is finished (exactly once, see
GenerationRun.finish) and the body generator is closed. A run that was not finished by its
own stream is recorded as failed with error_code "client_disconnected".
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, AsyncIterator

from starlette.responses import StreamingResponse

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

    from gateway.generation.run import GenerationRun

log = logging.getLogger(__name__)


class RunStreamingResponse(StreamingResponse):
    def __init__(self, content: AsyncIterator[bytes], run: GenerationRun, headers: dict[str, str] | None = None) -> None:
        super().__init__(content, media_type="text/event-stream", headers={**SSE_HEADERS, **(headers or {})})
        self._run = run
        self._content = content

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            run = self._run
            if not run.is_finished:
                run.fail("client_disconnected")
                log.info("client left stream %s before its end", run.request_id)
                run.finish()
            await close_generator(self._content)


async def close_generator(content: Any) -> None:
    """Close an async generator (running its `finally` if it started); errors are logged, never raised."""
    aclose = getattr(content, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except Exception:  # noqa: BLE001 - closing must not mask what ended the response
        log.debug("closing a response generator raised", exc_info=True)
