"""GET /metrics: Prometheus exposition. Engine cache and log-queue gauges are refreshed on each scrape.
With settings.protect_metrics it needs the admin key or settings.metrics_token."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Response

from gateway.deps import MetricsAccessDep, StateDep

router = APIRouter(tags=["metrics"])
log = logging.getLogger(__name__)


@router.get("/metrics")
def metrics(gw: StateDep, _: MetricsAccessDep) -> Response:
    refresh_gauges(gw)
    body, content_type = gw.metrics.render()
    return Response(content=body, media_type=content_type)


def refresh_gauges(gw) -> None:
    try:
        if gw.engine is not None:
            gw.metrics.set_engine_stats(gw.engine.stats())
        if gw.log_writer is not None:
            gw.metrics.set_log_queue(gw.log_writer.queue_depth, gw.log_writer.num_dropped)
    except Exception:  # a scrape must not fail because one gauge could not be read
        log.exception("could not refresh gauges")
