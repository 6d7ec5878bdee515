"""The one drain loop: a started run's backend chunks as TextDeltas, then the Answer.

    async for event in answer_events(run): ...     # a wire format's stream renders each event
    answer = await complete(run)                   # or the whole answer at once

Text streams as it comes unless it could be the start of a tool call (the ToolCallDetector holds
it); at the end the held text is either calls or one last TextDelta. A remote backend's own tool
calls count when the text parsed as none. The Answer's text is every TextDelta joined. A call that
max_tokens cut inside its JSON is still a call (its arguments as far as generated) and the answer's
finish_reason is then "length", as OpenAI's is.

`answer_events` leaves the run to its caller (a stream finishes the run after its own last
event); `complete` finishes it however the drain ends, and turns an unexpected exception
into the ApiError the client sees.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, AsyncIterator

from gateway.errors import ApiError, from_exception
from gateway.generation.result import Answer, TextDelta
from gateway.generation.tool_calls import from_openai_call

if TYPE_CHECKING:
    from gateway.generation.run import GenerationRun


async def answer_events(run: GenerationRun) -> AsyncIterator[TextDelta | Answer]:
    """TextDeltas as the client may see them, then exactly one Answer (unless the backend fails)."""
    detector = run.make_tool_call_detector()
    parts: list[str] = []
    backend_calls: list[dict] = []
    async for chunk in run.chunks():
        text = detector.feed(chunk.text)
        backend_calls.extend(chunk.tool_calls)
        if text:
            parts.append(text)
            yield TextDelta(text)
    rest, calls = detector.finish(is_cut=run.finish_reason == "length")
    if rest:
        parts.append(rest)
        yield TextDelta(rest)
    tool_calls = tuple(calls or [from_openai_call(call) for call in backend_calls])
    yield Answer("".join(parts), tool_calls, run.answer_finish_reason(tool_calls), run.api_usage(),
                 None if tool_calls else run.stop_sequence)


async def complete(run: GenerationRun) -> Answer:
    """Drain the backend and return the whole Answer; the run is finished when this returns or raises."""
    try:
        async for event in answer_events(run):
            last = event
        return last  # answer_events always ends with the Answer
    except BaseException as exc:
        run.fail_from(exc)
        if isinstance(exc, Exception) and not isinstance(exc, ApiError):
            raise from_exception(exc).name_field(run.request.names) from exc
        raise
    finally:
        run.finish()
