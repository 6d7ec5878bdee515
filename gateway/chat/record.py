"""RunRecorder: what a finished chat run leaves behind, one request-log row, metrics and one INFO line.

The row's keys are RequestLog columns; it carries no prompt text, only section
hashes, the signals the canonicalizer found and both shadows' figures. A run whose
canonical-shadow figure is still being computed is recorded when it is ready (on the
shadow's worker thread), so its row always carries it; meanwhile a provisional row without it is
spooled under the same id (LogWriter.reserve), so a crash in between still leaves a row. Recording never fails a request:
a writer or metrics error is logged and swallowed (the writer itself drops rows
when its queue is full, see gateway/db/log_writer.py).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.chat.prepare import PreparedRequest
    from gateway.chat.run import ChatRun
    from gateway.db.log_writer import LogWriter
    from gateway.insight.metrics import Metrics
    from gateway.insight.miss_cause import MissAttributor

log = logging.getLogger("gateway.requests")

SECTION_NAMES = ("system", "tools", "context", "history", "dynamic", "question")


@dataclass(frozen=True)
class RunRecorder:
    """Where finished runs go; each part is optional (None: that record is not kept)."""

    log_writer: LogWriter | None = None
    metrics: Metrics | None = None
    miss_attributor: MissAttributor | None = None

    def record(self, run: ChatRun) -> None:
        """Enqueue the run's log row, observe its metrics and write its INFO line, now or as soon
        as its canonical-shadow figure is ready."""
        future = run.counterfactual
        if future is not None and not future.done():
            if self.log_writer is not None:  # durable now, completed with the figure later (same id)
                self.log_writer.reserve(log_row(run, None))
            future.add_done_callback(lambda _: self.record_now(run))
            return
        self.record_now(run)

    def record_now(self, run: ChatRun) -> None:
        row = log_row(run, self.miss_attributor)
        try:
            if self.log_writer is not None:
                self.log_writer.enqueue(row)
            if self.metrics is not None:
                self.metrics.observe_request(
                    run.caller.tenant.name, row["prompt_tokens"], row["cached_tokens"] or 0,
                    None if row["ttft_ms"] is None else row["ttft_ms"] / 1000, row["latency_ms"] / 1000, run.status,
                    host_cached_tokens=row["host_cached_tokens"],
                )
        except Exception:  # recording must never fail a request
            log.exception("could not record request %s", run.request_id)
        log.info(
            "chat tenant=%s status=%s%s prompt=%d cached=%s (host %d) shadow=%s completion=%d ttft_ms=%s latency_ms=%.0f backend=%s template=%s",
            run.caller.tenant.name, run.status, f"({run.error_code})" if run.error_code else "",
            row["prompt_tokens"], "-" if row["cached_tokens"] is None else row["cached_tokens"], row["host_cached_tokens"],
            row["shadow_cached_tokens"], row["completion_tokens"],
            "-" if row["ttft_ms"] is None else f"{row['ttft_ms']:.0f}", row["latency_ms"], row["backend"], row["template"],
        )


def log_row(run: ChatRun, attributor: MissAttributor | None) -> dict[str, Any]:
    """The request-log row (keys are RequestLog columns). `attributor` names the miss cause of an ok run."""
    usage = run.api_usage()
    prepared = run.prepared
    row: dict[str, Any] = {
        "id": run.log_id,
        "created_at": run.created_at,
        "tenant_id": run.caller.tenant.id,
        "api_key_id": run.caller.api_key_id,
        "template": prepared.template_name if prepared else run.body.template,
        "template_version": prepared.template_version if prepared else None,
        "model": run.model_id or run.body.model,
        "backend": run.backend.name if run.backend else None,
        "canonicalized": run.body.canonicalize,
        "prompt_tokens": usage.prompt_tokens,
        "cached_tokens": run.delivered_cached_tokens(),
        "predicted_cached_tokens": getattr(run.backend, "predicted_cached_tokens", None),
        "failovers": getattr(run.backend, "num_failovers", None),
        "host_cached_tokens": run.usage.host_cached_tokens if run.usage is not None else 0,
        "completion_tokens": usage.completion_tokens,
        "shadow_cached_tokens": run.shadow_cached_tokens,
        **canonical_fields(run),
        "ttft_ms": run.ttft_ms(),
        "latency_ms": (time.perf_counter() - run.started_s) * 1000,
        "status": run.status,
        "error_code": run.error_code,
        "miss_cause": None,
    }
    if prepared is not None:
        row.update(section_fields(run, prepared, attributor))
    return row


def canonical_fields(run: ChatRun) -> dict[str, Any]:
    """The canonical shadow's figures (all None when it is off or had no rendering)."""
    future = run.counterfactual
    figures = future.result() if future is not None and future.done() and future.exception() is None else None
    return {
        "canonical_cached_tokens": figures.cached_tokens if figures else None,
        "canonical_prompt_tokens": figures.prompt_tokens if figures else None,
        "static_prefix_tokens": figures.static_prefix_tokens if figures else None,
        "system_prefix_tokens": figures.system_prefix_tokens if figures else None,
    }


def section_fields(run: ChatRun, prepared: PreparedRequest, attributor: MissAttributor | None) -> dict[str, Any]:
    sections = prepared.sections
    signals = sections.signals
    hashes = sections.hashes()
    fields: dict[str, Any] = {f"{name}_hash": hashes.get(name) for name in SECTION_NAMES}
    fields["sections_found"] = ",".join(signals.found)
    fields["dynamic_hoisted"] = bool(signals.dynamic_hoisted)
    fields["was_canonical"] = bool(signals.was_canonical)
    fields["dynamic_patterns"] = ",".join(getattr(signals, "dynamic_patterns", []) or []) or None
    if attributor is not None and run.status == "ok":
        fields["miss_cause"] = attributor.attribute(run.caller.tenant.id, hashes)
    return fields
