"""The experiment store's interface: batches of rows, and the reads and writes every backend offers.

Implementations: `hpo.tracking.store.sqlite.SQLiteStore`, `hpo.tracking.store.postgres.PostgresStore`;
`hpo.tracking.store.open_store` picks one. This module never imports an implementation.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpo.tracking.digest import digest_path
from hpo.tracking.store.schema import EVENT_KINDS, TERMINAL_STATUS, decode_row, parse_run_id


@dataclass
class Batch:
    """Rows to write in one transaction. `runs` are upserts: only the columns given are set."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    artifacts: list[dict[str, Any]] = field(default_factory=list)

    def add(self, table: str, row: dict[str, Any]) -> None:
        getattr(self, table).append(row)

    def __len__(self) -> int:
        return len(self.runs) + len(self.metrics) + len(self.events) + len(self.artifacts)


class ExperimentStore(ABC):
    """Backend-neutral reads and writes. Implementations: `SQLiteStore`, `PostgresStore`."""

    url: str

    # ---- writing ----------------------------------------------------------------------------------------------
    @abstractmethod
    def write(self, batch: Batch) -> None:
        """Write every row of the batch in one transaction (retrying while the database is busy)."""

    def upsert_run(self, run_id: str, **columns: Any) -> None:
        self.write(Batch(runs=[{"id": run_id, **columns}]))

    def record_event(
        self, run_id: str, kind: str, message: str = "", data: dict[str, Any] | None = None
    ) -> None:
        """Append an event; a terminal kind (completed, pruned, failed, interrupted) also sets the run's status."""
        self.write(event_batch(run_id, kind, message, data))

    def add_metrics(
        self, run_id: str, step: int, values: dict[str, float], epoch: float | None = None
    ) -> None:
        now = time.time()
        rows = [
            {"run_id": run_id, "step": step, "epoch": epoch, "name": k, "value": v, "time": now}
            for k, v in values.items()
        ]
        self.write(Batch(metrics=rows))

    def add_artifact(
        self, run_id: str, kind: str, path: str | Path, step: int | None = None
    ) -> dict[str, Any]:
        row = {"run_id": run_id, "kind": kind, "path": str(path), "step": step, "time": time.time()}
        row.update(digest_path(path))
        self.write(Batch(artifacts=[row]))
        return row

    # ---- reading ----------------------------------------------------------------------------------------------
    @abstractmethod
    def _select(self, table: str, where: dict[str, Any], order_by: list[str]) -> list[dict[str, Any]]:
        """Rows of `table` whose columns equal `where`'s values (None values ignored), ordered."""

    def _rows(self, table: str, order_by: list[str], **where: Any) -> list[dict[str, Any]]:
        where = {k: v for k, v in where.items() if v is not None}
        return [decode_row(table, row) for row in self._select(table, where, order_by)]

    def runs(self, *, study_name: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        return self._rows("hpo_runs", ["started_at", "id"], study_name=study_name, kind=kind)

    def run(self, run_id: str) -> dict[str, Any] | None:
        found = self._rows("hpo_runs", ["id"], id=run_id)
        return found[0] if found else None

    def metrics(self, run_id: str | None = None, *, name: str | None = None) -> list[dict[str, Any]]:
        return self._rows("hpo_metrics", ["run_id", "step", "time", "name"], run_id=run_id, name=name)

    def events(self, run_id: str | None = None, *, kind: str | None = None) -> list[dict[str, Any]]:
        return self._rows("hpo_events", ["time"], run_id=run_id, kind=kind)

    def artifacts(self, run_id: str | None = None, *, kind: str | None = None) -> list[dict[str, Any]]:
        return self._rows("hpo_artifacts", ["time"], run_id=run_id, kind=kind)

    @abstractmethod
    def close(self) -> None:
        """Release connections."""

    def __enter__(self) -> ExperimentStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def event_batch(run_id: str, kind: str, message: str = "", data: dict[str, Any] | None = None) -> Batch:
    if kind not in EVENT_KINDS:
        raise ValueError(f"unknown event kind {kind!r}; kinds are {', '.join(EVENT_KINDS)}")
    now = time.time()
    batch = Batch(
        events=[{"run_id": run_id, "time": now, "kind": kind, "message": message, "data": data or {}}]
    )
    if kind in TERMINAL_STATUS:
        batch.runs.append(
            {"id": run_id, **parse_run_id(run_id), "status": TERMINAL_STATUS[kind], "ended_at": now}
        )
    return batch
