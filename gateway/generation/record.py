"""RunRecord and RunRecorder: what a finished run leaves behind, one request-log row, metrics and one INFO line.

The run hands its recorder a finished, immutable RunRecord (GenerationRun.to_record); the recorder
never reaches back into the run. The row's keys are RequestLog columns; it carries no prompt text,
only section hashes, the signals the canonicalizer found and both shadows' figures. A record whose
canonical-shadow figure is still being computed is written when it is ready (on the shadow's
worker thread), so its row always carries it; meanwhile a provisional row without it is spooled
under the same id (LogWriter.reserve), so a crash in between still leaves a row. Recording never
fails a request: a writer or metrics error is logged and swallowed (the writer itself drops rows
when its queue is full, see gateway/db/log_writer.py).
"""

from __future__ import annotations

import logging
import uuid
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.canonicalize import Sections
    from gateway.db.log_writer import LogWriter
    from gateway.generation.result import Usage
    from gateway.insight.cache_diagnosis import CacheDiagnosis
    from gateway.insight.counterfactual import CanonicalFigures
    from gateway.insight.metrics import Metrics
    from gateway.insight.miss_cause import MissAttributor

log = logging.getLogger("gateway.requests")

SECTION_NAMES = ("system", "tools", "context", "history", "dynamic", "question")


@dataclass(frozen=True)
class RunRecord:
    """A finished run, as the request log and metrics see it. `sections` is None for a run that failed
    before preparation; `counterfactual` is the canonical shadow's pending figure (None: shadow off)."""

    log_id: uuid.UUID
    request_id: str
    created_at: datetime
    tenant_id: int
    tenant_name: str
    api_key_id: int
    template: str | None
    template_version: int | None
    model: str
    backend: str | None
    canonicalized: bool
    usage: Usage
    cached_tokens: int | None  # delivered by the backend; None: unknown
    predicted_cached_tokens: int | None
    failovers: int | None
    host_cached_tokens: int
    shadow_cached_tokens: int | None
    counterfactual: Future[CanonicalFigures | None] | None
    sections: Sections | None
    ttft_ms: float | None
    latency_ms: float
    status: str
    error_code: str | None
    diagnosis: CacheDiagnosis | None = None  # the run's cache diagnosis (insight/cache_diagnosis.py), if kept


@dataclass(frozen=True)
class RunRecorder:
    """Where finished runs go; each part is optional (None: that record is not kept)."""

    log_writer: LogWriter | None = None
    metrics: Metrics | None = None
    miss_attributor: MissAttributor | None = None

    def record(self, record: RunRecord) -> None:
        """Enqueue the record's log row, observe its metrics and write its INFO line, now or as soon
        as its canonical-shadow figure is ready."""
        future = record.counterfactual
        if future is not None and not future.done():
            if self.log_writer is not None:  # durable now, completed with the figure later (same id)
                self.log_writer.reserve(log_row(record, None))
            future.add_done_callback(lambda _: self.record_now(record))
            return
        self.record_now(record)

    def record_now(self, run: RunRecord) -> None:
        row = log_row(run, self.miss_attributor)
        try:
            if self.log_writer is not None:
                self.log_writer.enqueue(row)
            if self.metrics is not None:
                self.metrics.observe_request(
                    run.tenant_name, row["prompt_tokens"], row["cached_tokens"] or 0,
                    None if row["ttft_ms"] is None else row["ttft_ms"] / 1000, row["latency_ms"] / 1000, run.status,
                    host_cached_tokens=row["host_cached_tokens"],
                )
        except Exception:  # recording must never fail a request
            log.exception("could not record request %s", run.request_id)
        log.info(
            "chat tenant=%s status=%s%s prompt=%d cached=%s (host %d) shadow=%s completion=%d ttft_ms=%s latency_ms=%.0f backend=%s template=%s",
            run.tenant_name, run.status, f"({run.error_code})" if run.error_code else "",
            row["prompt_tokens"], "-" if row["cached_tokens"] is None else row["cached_tokens"], row["host_cached_tokens"],
            row["shadow_cached_tokens"], row["completion_tokens"],
            "-" if row["ttft_ms"] is None else f"{row['ttft_ms']:.0f}", row["latency_ms"], row["backend"], row["template"],
        )


def log_row(run: RunRecord, attributor: MissAttributor | None) -> dict[str, Any]:
    """The request-log row (keys are RequestLog columns). An ok run's miss cause is its cache diagnosis's reason
    (insight/cache_diagnosis.py); `attributor` names one only for a run without a diagnosis."""
    row: dict[str, Any] = {
        "id": run.log_id,
        "created_at": run.created_at,
        "tenant_id": run.tenant_id,
        "api_key_id": run.api_key_id,
        "template": run.template,
        "template_version": run.template_version,
        "model": run.model,
        "backend": run.backend,
        "canonicalized": run.canonicalized,
        "prompt_tokens": run.usage.prompt_tokens,
        "cached_tokens": run.cached_tokens,
        "predicted_cached_tokens": run.predicted_cached_tokens,
        "failovers": run.failovers,
        "host_cached_tokens": run.host_cached_tokens,
        "completion_tokens": run.usage.completion_tokens,
        "shadow_cached_tokens": run.shadow_cached_tokens,
        **canonical_fields(run.counterfactual),
        "ttft_ms": run.ttft_ms,
        "latency_ms": run.latency_ms,
        "status": run.status,
        "error_code": run.error_code,
        "miss_cause": None,
    }
    if run.sections is not None:
        row.update(section_fields(run, run.sections, attributor))
    return row


def canonical_fields(future: Future[CanonicalFigures | None] | None) -> dict[str, Any]:
    """The canonical shadow's figures (all None when it is off or had no rendering)."""
    figures = future.result() if future is not None and future.done() and future.exception() is None else None
    return {
        "canonical_cached_tokens": figures.cached_tokens if figures else None,
        "canonical_prompt_tokens": figures.prompt_tokens if figures else None,
        "static_prefix_tokens": figures.static_prefix_tokens if figures else None,
        "system_prefix_tokens": figures.system_prefix_tokens if figures else None,
    }


def section_fields(run: RunRecord, sections: Sections, attributor: MissAttributor | None) -> dict[str, Any]:
    signals = sections.signals
    hashes = sections.hashes()
    fields: dict[str, Any] = {f"{name}_hash": hashes.get(name) for name in SECTION_NAMES}
    fields["sections_found"] = ",".join(signals.found)
    fields["dynamic_hoisted"] = bool(signals.dynamic_hoisted)
    fields["was_canonical"] = bool(signals.was_canonical)
    fields["dynamic_patterns"] = ",".join(getattr(signals, "dynamic_patterns", []) or []) or None
    if run.diagnosis is not None and run.status == "ok":  # the one classification the header and the doctor use
        fields["miss_cause"] = run.diagnosis.log_reason
    elif attributor is not None and run.status == "ok":
        fields["miss_cause"] = attributor.attribute(run.tenant_id, hashes)
    return fields
