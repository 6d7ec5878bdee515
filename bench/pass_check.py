"""What every engine bench checks after a pass: no KV page leaked, no request failed; and the queue
deadline engine benches run under (they queue whole workloads at once: nothing may time out there)."""

from __future__ import annotations

from collections.abc import Sequence

from engine import Engine, EngineError, RequestOutput

NO_QUEUE_DEADLINE_S = 24 * 3600.0


def flush_and_check(engine: Engine, finals: Sequence[RequestOutput]) -> None:
    """Flush the cache, then raise on a leaked page (every page must be free) or the first request error."""
    engine.flush_cache()
    if engine.pool.num_free_pages != engine.pool.num_pages:
        raise EngineError(f"page leak: {engine.pool.num_pages - engine.pool.num_free_pages} pages held")
    errors = [f.error for f in finals if f.error is not None]
    if errors:
        raise errors[0]
