"""LogWriter: request-log rows are queued by requests and inserted in batches by a background thread.

Contract:
- `enqueue(row)` never blocks on the database and never raises: it appends to a bounded
  in-memory queue (O(1)), or, when the queue holds `max_queue` rows, drops the row and counts it
  (`num_dropped`, the metric, and a rate-limited warning saying how many).
- The writer thread takes up to `batch_size` rows (the in-flight batch, still counted in
  `queue_depth`) and inserts them in ONE transaction. A transient failure (database down, locked,
  connection cut) retries the same batch, with exponential backoff, until it commits.
- No duplicates: every row carries a client-generated uuid primary key and is inserted with
  ON CONFLICT DO NOTHING, so a retry after an ambiguous commit (committed, but the reply was lost)
  writes nothing twice.
- A batch that fails for a non-transient reason (a value the schema rejects) is split and written
  row by row; rows that still fail are dropped and counted.
- `stop(flush=True)` writes what is queued (waiting up to `timeout_s` for the database), then
  drops and counts whatever is left.
- With a `spool` (gateway/db/log_spool.py) every accepted row is first appended to a local file,
  so a row is durable once `enqueue` returns, whatever happens next: a database outage longer
  than the memory queue (rows past `max_queue` are kept in the spool only, not dropped), a stop
  that times out, or a crash (kill -9). Spool segments whose rows are all committed are deleted;
  the others (and every segment found at start) are replayed, each row exactly once (the insert
  skips existing ids). `reserve(row)` spools a row without queueing it (a provisional version
  whose complete version is enqueued later under the same id; a replay keeps the later one).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.db.drop_counter import DropCounter
from gateway.db.log_insert import insert_ignoring_duplicates, is_transient
from gateway.db.log_row import RowNormalizer

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from gateway.db.log_spool import LogSpool
    from gateway.insight.metrics import Metrics

logger = logging.getLogger(__name__)


class LogWriter:
    def __init__(
        self,
        session_factory: sessionmaker[Session],
        max_queue: int = 10_000,
        batch_size: int = 500,
        flush_interval_s: float = 0.5,
        metrics: Metrics | None = None,
        *,
        max_backoff_s: float = 2.0,
        spool: LogSpool | None = None,
    ) -> None:
        if max_queue < 1 or batch_size < 1:
            raise ValueError("max_queue and batch_size must be >= 1")
        self._session_factory = session_factory
        self.max_queue = max_queue
        self.batch_size = batch_size
        self.flush_interval_s = flush_interval_s
        self.max_backoff_s = max_backoff_s
        self._metrics = metrics
        self._normalizer = RowNormalizer()
        self._rows: deque[tuple[int, dict]] = deque()  # (sequence number, row)
        self._num_in_flight = 0
        self._spool = spool
        self._next_seq = 0
        self._committed_seq = -1  # every queued row up to here is committed (batches commit in order)
        self._is_orphaned = False  # the current spool segment holds rows the memory queue does not
        self._sealed: deque[tuple[Path, int, bool]] = deque()  # (segment, its highest seq, must replay)
        for path in spool.segments() if spool is not None else ():  # left by an earlier run: replay them
            self._sealed.append((path, -1, True))
        self.num_spooled_only = 0
        self._lock = threading.Lock()
        self._wakeup = threading.Event()
        self._stopping = threading.Event()
        self._aborting = threading.Event()
        self._thread: threading.Thread | None = None
        self._drops = DropCounter(logger, "request-log rows")
        self.num_written = 0
        self.num_retries = 0

    @property
    def queue_depth(self) -> int:
        """Rows waiting, including the batch being written."""
        return len(self._rows) + self._num_in_flight

    @property
    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self.is_running:
            raise RuntimeError("LogWriter already started")
        self._stopping.clear()
        self._aborting.clear()
        self._thread = threading.Thread(target=self._run, name="radixgate-log-writer", daemon=True)
        self._thread.start()

    def stop(self, flush: bool = True, timeout_s: float = 10.0) -> None:
        """Stop the writer; with `flush`, write what is queued first (up to `timeout_s`)."""
        if not flush:
            self._aborting.set()
        self._stopping.set()
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                self._aborting.set()
                self._thread.join(max(1.0, self.max_backoff_s + 1.0))
            self._thread = None
        with self._lock:
            num_left = len(self._rows)
            self._rows.clear()
        if num_left and self._spool is not None:
            logger.warning("%d request-log rows not written yet; they stay in the spool for the next start", num_left)
        elif num_left:
            self._count_dropped(num_left, reason="writer stopped before they could be written")
        if self._spool is not None:
            self._spool.close()
        self._drops.flush_log(force=True)
        self._publish()

    def enqueue(self, row: dict) -> bool:
        """Queue one row; True if queued, False if dropped (queue full or unusable row). Never raises."""
        try:
            full, unknown = self._normalizer.normalize(row)
            if unknown:
                logger.warning("request-log row has unknown keys %s; they are not stored", sorted(unknown))
        except Exception:  # noqa: BLE001 - a bad row must never fail the request that logs it
            logger.exception("unusable request-log row dropped")
            self._count_dropped(1, reason="unusable row")
            return False
        with self._lock:
            seq, self._next_seq = self._next_seq, self._next_seq + 1
            is_spooled = self._spool_append(full, seq)
            is_full = len(self._rows) + self._num_in_flight >= self.max_queue
            if not is_full:
                self._rows.append((seq, full))
                num_waiting = len(self._rows)
            elif is_spooled:
                self._is_orphaned = True
                self.num_spooled_only += 1
        if is_full and not is_spooled:
            self._count_dropped(1, reason=f"log queue full ({self.max_queue} rows)")
            return False
        if is_full:
            return True
        if num_waiting >= self.batch_size:
            self._wakeup.set()
        return True

    def reserve(self, row: dict) -> bool:
        """Spool `row` without queueing it (no spool: does nothing); True if spooled. Never raises."""
        if self._spool is None:
            return False
        try:
            full, _ = self._normalizer.normalize(row)
            with self._lock:
                return self._spool_append(full, -1)
        except Exception:  # noqa: BLE001
            logger.exception("request-log row could not be spooled")
            return False

    def _spool_append(self, row: dict, seq: int) -> bool:
        """Under self._lock."""
        if self._spool is None:
            return False
        try:
            return self._spool.append(row, seq)
        except OSError as exc:
            logger.warning("request-log spool not writable (%s); the row waits in memory only", exc)
            return False

    def _run(self) -> None:
        if self._spool is not None:  # what an earlier run left is replayed before anything else
            self._tend_spool()
        while True:
            self._wakeup.wait(self.flush_interval_s)
            self._wakeup.clear()
            while not self._aborting.is_set() and (batch := self._take_batch()):
                self._write_until_done(batch)
            if self._spool is not None:
                self._tend_spool()
            self._publish()
            self._drops.flush_log()
            if self._stopping.is_set() and (not self._rows or self._aborting.is_set()):
                return

    def _tend_spool(self) -> None:
        """Seal the current segment; delete sealed segments whose rows are committed, replay the others."""
        with self._lock:
            sealed = self._spool.seal()
            if sealed is not None:
                self._sealed.append((*sealed, self._is_orphaned))
                self._is_orphaned = False
        while self._sealed and not self._aborting.is_set():
            path, max_seq, must_replay = self._sealed[0]
            if must_replay:
                if not self._replay(path):
                    return
            elif max_seq > self._committed_seq:
                return
            self._sealed.popleft()
            self._spool.discard(path)

    def _replay(self, path: Path) -> bool:
        """Insert a segment's rows (skipping ids already stored); False if stopped before it was done."""
        rows = self._spool.read_segment(path)
        for start in range(0, len(rows), self.batch_size):
            with self._lock:
                self._num_in_flight = len(rows[start:start + self.batch_size])
            if not self._write_until_done([(-1, row) for row in rows[start:start + self.batch_size]]):
                return False
        if rows:
            logger.info("request-log spool %s replayed: %d rows", path.name, len(rows))
        return True

    def _take_batch(self) -> list[tuple[int, dict]]:
        with self._lock:
            size = min(self.batch_size, len(self._rows))
            batch = [self._rows.popleft() for _ in range(size)]
            self._num_in_flight = size
        return batch

    def _write_until_done(self, entries: list[tuple[int, dict]]) -> bool:
        """Write the rows as one transaction, retrying transient failures with backoff; False if the
        writer was stopped first (the rows are then counted as dropped, or left in the spool)."""
        batch = [row for _, row in entries]
        max_seq = max(seq for seq, _ in entries)
        backoff_s = 0.05
        num_failures = 0
        while True:
            try:
                self._insert(batch)
                self._finish_batch(num_written=len(batch), max_seq=max_seq)
                if num_failures:
                    logger.warning("request-log database back after %d retries", num_failures)
                return True
            except Exception as exc:  # noqa: BLE001 - the writer thread must outlive any failure
                if not is_transient(exc):
                    self._write_rows_one_by_one(batch, exc, max_seq)
                    return True
                self.num_retries += 1
                num_failures += 1
                if num_failures == 1 or num_failures % 30 == 0:  # an outage logs once, then ~every minute
                    logger.warning("request-log batch of %d rows not written (%s: %s); %d rows queued; retrying",
                                   len(batch), type(exc).__name__, str(exc).splitlines()[0][:200], self.queue_depth)
            if self._aborting.wait(backoff_s):
                self._finish_batch(num_written=0)
                if self._spool is None:
                    self._count_dropped(len(batch), reason="writer stopped while the database was unavailable")
                return False
            backoff_s = min(backoff_s * 2, self.max_backoff_s)

    def _write_rows_one_by_one(self, batch: list[dict], exc: Exception, max_seq: int) -> None:
        logger.error("request-log batch rejected (%s); writing its %d rows one by one", exc, len(batch))
        num_written = 0
        for row in batch:
            try:
                self._insert([row])
                num_written += 1
            except Exception:  # noqa: BLE001
                logger.exception("request-log row %s rejected by the database; dropped", row["id"])
                self._count_dropped(1, reason="rejected by the database")
        self._finish_batch(num_written=num_written, max_seq=max_seq)

    def _insert(self, rows: list[dict]) -> None:
        with self._session_factory() as session, session.begin():
            session.execute(insert_ignoring_duplicates(session.get_bind().dialect.name), rows)

    def _finish_batch(self, num_written: int, max_seq: int = -1) -> None:
        with self._lock:
            self._num_in_flight = 0
            self.num_written += num_written
            self._committed_seq = max(self._committed_seq, max_seq)

    @property
    def num_dropped(self) -> int:
        return self._drops.num_dropped

    def _count_dropped(self, num_rows: int, reason: str) -> None:
        self._drops.count(num_rows, reason)
        self._publish()

    def _publish(self) -> None:
        if self._metrics is not None:
            self._metrics.set_log_queue(self.queue_depth, self.num_dropped)

