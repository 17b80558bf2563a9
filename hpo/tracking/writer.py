"""A background writer between the training loop and the experiment store.

The loop only puts rows on a bounded queue (`submit` never blocks); one thread opens the store, gathers rows into batches
and writes each batch in one transaction, every `flush_interval` seconds or `batch_size` rows, and at `close`. A store
that does not answer (a database restart or failover, a SQLite file locked past its busy timeout) is waited for, up to
`storage.outage_timeout` (hpo.storage.outage), with its rows on the queue: `close` waits for them as long. A store that
fails otherwise, or a queue that fills meanwhile, costs rows (counted in `dropped`, and warned about once), never the
trial and never a stalled step.
Checkpoint digests are computed here too, so hashing a large checkpoint never holds up training.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from hpo.storage import outage
from hpo.tracking.digest import digest_path
from hpo.tracking.logs import numeric_items
from hpo.tracking.store import Batch, ExperimentStore

logger = logging.getLogger(__name__)

_FLUSH = object()
_STOP = object()


class BackgroundWriter:
    def __init__(
        self,
        open_store: Callable[[], ExperimentStore],
        *,
        max_pending: int = 20_000,
        batch_size: int = 1_000,
        flush_interval: float = 1.0,
        write_attempts: int = 3,
    ) -> None:
        self._open_store = open_store
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_pending)
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self.write_attempts = write_attempts
        self.dropped = 0
        self.written = 0
        self.last_error: str | None = None
        self._store: ExperimentStore | None = None
        self._lock = threading.Lock()
        self._flushed = threading.Condition(self._lock)
        self._flush_requests = 0
        self._flushes_done = 0
        self._closed = False
        self._down_since: float | None = None  # the store stopped answering (an outage): its rows wait
        self._thread = threading.Thread(target=self._run, name="hpo-store-writer", daemon=True)
        self._thread.start()

    # ---- producer side (the training loop) --------------------------------------------------------------------
    def submit(self, table: str, row: dict[str, Any]) -> bool:
        """Queue one row for `table` ("runs", "metrics", "events", "artifacts", or "log": a whole Trainer log record
        {run_id, step, epoch, time, values}); False when it had to be dropped."""
        if self._closed:
            self._drop(1, "writer is closed")
            return False
        try:
            self._queue.put_nowait((table, row))
            return True
        except queue.Full:
            self._drop(1, "queue full: the store cannot keep up")
            return False

    def submit_batch(self, batch: Batch) -> None:
        for table in ("runs", "metrics", "events", "artifacts"):
            for row in getattr(batch, table):
                self.submit(table, row)

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every row submitted before this call is written (or dropped). False on timeout."""
        with self._lock:
            self._flush_requests += 1
            ticket = self._flush_requests
        try:
            self._queue.put(_FLUSH, timeout=timeout)
        except queue.Full:
            return False
        with self._flushed:
            return self._flushed.wait_for(lambda: self._flushes_done >= ticket, timeout=timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Write what is queued (within `timeout`), stop the thread and close the store."""
        if self._closed:
            return
        self._closed = True
        try:
            self._queue.put(_STOP, timeout=timeout)
        except queue.Full:
            logger.warning("experiment store writer: could not stop within %.0f s", timeout)
            return
        self._thread.join(timeout)
        while self._thread.is_alive() and self.waiting_out_an_outage():
            self._thread.join(
                1.0
            )  # the rows wait for the store as the study does, up to storage.outage_timeout
        if self._thread.is_alive():
            logger.warning("experiment store writer: rows still pending after %.0f s were dropped", timeout)
        if self.dropped:
            logger.warning(
                "experiment store writer: %d rows could not be written (%s)", self.dropped, self.last_error
            )

    # ---- consumer side (the writer thread) --------------------------------------------------------------------
    def _run(self) -> None:
        batch = Batch()
        deadline = time.monotonic() + self.flush_interval
        while True:
            try:
                item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                item = None
            due = time.monotonic() >= deadline or len(batch) >= self.batch_size
            if item is _STOP or item is _FLUSH or item is None or due:
                self._write(batch)
                batch = Batch()
                deadline = time.monotonic() + self.flush_interval
            if item is _STOP:
                break
            if item is _FLUSH:
                with self._flushed:
                    self._flushes_done += 1
                    self._flushed.notify_all()
            elif item is not None:
                self._add(batch, *item)
        if self._store is not None:
            self._store.close()

    def _add(self, batch: Batch, table: str, row: dict[str, Any]) -> None:
        if table == "log":  # a whole Trainer log record: one metrics row per number in it
            base = {k: row[k] for k in ("run_id", "step", "epoch", "time")}
            for name, value in numeric_items(row["values"]).items():
                batch.metrics.append({**base, "name": name, "value": value})
            return
        if table == "artifacts" and row.get("sha256") is None:
            try:
                row = {**row, **digest_path(row["path"])}
            except OSError as error:  # deleted by checkpoint rotation before we got to it
                row = {**row, "size": None}
                logger.debug("artifact %s: %s", row.get("path"), error)
        batch.add(table, row)

    def _write(self, batch: Batch) -> None:
        if not len(batch):
            return
        failures, waits = 0, outage.backoff_caps()
        while True:
            try:
                if self._store is None:
                    self._store = self._open_store()
                self._store.write(batch)
                self.written += len(batch)
                self._answered()
                return
            except Exception as error:  # a store that is down costs rows, never the trial
                self.last_error = f"{type(error).__name__}: {error}"
                self._reset_store()
                if outage.is_unreachable(error) and self._wait_out(error):
                    time.sleep(outage.jittered(next(waits)))
                    continue
                failures += 1
                if failures >= self.write_attempts:
                    break
                time.sleep(0.2 * 2 ** (failures - 1))
        self._drop(len(batch), self.last_error or "write failed")

    def _wait_out(self, error: BaseException) -> bool:
        """Whether to wait for a store that does not answer: yes until storage.outage_timeout has passed."""
        if self._down_since is None:
            self._down_since = time.monotonic()
            logger.info("experiment store unreachable (%s); its rows wait", outage.root_cause(error))
        return self.waiting_out_an_outage()

    def waiting_out_an_outage(self) -> bool:
        since = self._down_since
        return since is not None and time.monotonic() - since < outage.clock.timeout

    def _answered(self) -> None:
        if self._down_since is not None:
            logger.info("experiment store back after %.0f s", time.monotonic() - self._down_since)
            self._down_since = None

    def _reset_store(self) -> None:
        if self._store is not None:
            try:
                self._store.close()
            except Exception:
                pass
        self._store = None

    def _drop(self, count: int, reason: str) -> None:
        with self._lock:
            first = not self.dropped
            self.dropped += count
            self.last_error = self.last_error or reason
        if first:
            logger.warning("experiment store: dropping rows (%s); training goes on", reason)
