"""How a caller receives one request's outputs, which the step thread emits one by one.

    AsyncOutputs   for a caller on an event loop: each output is handed to that loop thread-safely and
                   read by iterating `stream(request_id)`; the iteration ends after the final output,
                   raises the request's error if it has one, and aborts the request if the caller
                   leaves early (or the loop is closed before an output arrives)
    FinalOutput    for a blocking caller: `result(timeout)` waits for the final output (raising the
                   request's error if it has one); earlier outputs are not kept
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future

from engine.sampling_params import RequestOutput


class AsyncOutputs:
    """Build it on the caller's event loop; pass `emit` to Engine.submit."""

    def __init__(self, abort: Callable[[str], None]) -> None:
        self._loop = asyncio.get_running_loop()
        self._outputs: asyncio.Queue = asyncio.Queue()
        self._abort = abort

    def emit(self, output: RequestOutput) -> None:
        try:
            self._loop.call_soon_threadsafe(self._outputs.put_nowait, output)
        except RuntimeError:  # the caller's loop is closed: nobody is listening
            self._abort(output.request_id)

    async def stream(self, request_id: str) -> AsyncIterator[RequestOutput]:
        is_done = False
        try:
            while not is_done:
                output = await self._outputs.get()
                is_done = output.is_finished
                if output.error is not None:
                    raise output.error
                yield output
        finally:
            if not is_done:
                self._abort(request_id)


class FinalOutput:
    """Pass `emit` to Engine.submit, then wait on `result`."""

    def __init__(self) -> None:
        self._future: Future = Future()

    def emit(self, output: RequestOutput) -> None:
        if output.is_finished:
            self._future.set_result(output)

    def result(self, timeout: float | None = None) -> RequestOutput:
        output = self._future.result(timeout)
        if output.error is not None:
            raise output.error
        return output
