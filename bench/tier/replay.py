"""Replay agent requests on an engine, all submitted at once, outputs returned in request order."""

from __future__ import annotations

from engine import Engine, RequestOutput, SamplingParams
from bench.policy.prompts import AgentRequest
from bench.progress import Progress


def replay_in_order(engine: Engine, requests: list[AgentRequest], label: str,
                    progress: Progress | None) -> list[RequestOutput]:
    """Submit every request (greedy, each row's max_tokens), run the loop here until all finished."""
    finals: dict[str, RequestOutput] = {}

    def emit(output: RequestOutput) -> None:  # on the step loop, i.e. this thread
        if output.is_finished:
            finals[output.request_id] = output
            if progress:
                progress(label, len(finals))
            if len(finals) == len(requests):
                engine.shutdown()

    for req in requests:
        engine.submit(req.token_ids, SamplingParams(max_tokens=req.max_tokens, temperature=0.0), emit,
                      namespace=req.namespace, request_id=req.request_id)
    engine.run_here()
    return [finals[r.request_id] for r in requests]
