"""The experiment store: every run and trial, its metrics, events and artifacts, in four tables.

The same tables and columns live in a SQLite file (sqlite-utils, WAL, busy timeout) or in a PostgreSQL database
(SQLAlchemy), so that a study whose Optuna storage is PostgreSQL keeps its experiment records in the same database and
workers on many machines write to one place. Dashboards and `hpo export` read them through `open_store(...)`.

Schema (JSON columns hold JSON text on both backends; times are unix seconds):

    hpo_runs       one row per `hpo train` run or study trial
        id TEXT PRIMARY KEY     "<study>/trial-<number>" for a trial, "run/<name>-<unix time>" for a single run
        kind TEXT               "trial" | "run"
        study_name TEXT, trial_number INTEGER, name TEXT
        status TEXT             running | completed | pruned | failed | interrupted
        params JSON             the sampled hyperparameters (or the run file's `model:` dict)
        arguments JSON          TrainingArguments.to_dict()
        state JSON              the final TrainerState (global_step, best_metric, best_global_step, ...; no log_history)
        started_at REAL, ended_at REAL, host TEXT, slot TEXT, devices TEXT
        command TEXT            the command line of the process
        packages JSON           versions of torch, optuna, transformers, ... and hpo
        git_commit TEXT         commit of the working folder, when it is a git checkout
        output_dir TEXT, objective REAL (first objective value), extra JSON (values, best_step, error, ...)
    hpo_metrics    one row per number in every Trainer log record
        run_id TEXT, step INTEGER (global step), epoch REAL, name TEXT, value REAL, time REAL
    hpo_events     run_id TEXT, time REAL, kind TEXT, message TEXT, data JSON
        kinds: started, evaluated, pruned, failed, retried, resumed, interrupted, completed
    hpo_artifacts  run_id TEXT, kind TEXT ("checkpoint" | "export"), path TEXT, sha256 TEXT, size INTEGER, step INTEGER,
                   time REAL.  For a folder, sha256 is the digest of its sorted "relative-path sha256-of-file" lines and
                   size is the sum of its files' sizes (see `hpo.tracking.digest`).
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

JSON = "json"

TABLES: dict[str, dict[str, Any]] = {
    "hpo_runs": {
        "id": str,
        "kind": str,
        "study_name": str,
        "trial_number": int,
        "name": str,
        "status": str,
        "params": JSON,
        "arguments": JSON,
        "state": JSON,
        "started_at": float,
        "ended_at": float,
        "host": str,
        "slot": str,
        "devices": str,
        "command": str,
        "packages": JSON,
        "git_commit": str,
        "output_dir": str,
        "objective": float,
        "extra": JSON,
    },
    "hpo_metrics": {"run_id": str, "step": int, "epoch": float, "name": str, "value": float, "time": float},
    "hpo_events": {"run_id": str, "time": float, "kind": str, "message": str, "data": JSON},
    "hpo_artifacts": {
        "run_id": str,
        "kind": str,
        "path": str,
        "sha256": str,
        "size": int,
        "step": int,
        "time": float,
    },
}
# Indexes that make the dashboard's and export's lookups cheap.
INDEXES: dict[str, list[list[str]]] = {
    "hpo_runs": [["study_name", "trial_number"]],
    "hpo_metrics": [["run_id", "name", "step"]],
    "hpo_events": [["run_id", "time"], ["kind"]],
    "hpo_artifacts": [["run_id", "kind"]],
}
EVENT_KINDS = ("started", "evaluated", "pruned", "failed", "retried", "resumed", "interrupted", "completed")
# An event of one of these kinds also sets the run's status.
TERMINAL_STATUS = {
    "completed": "completed",
    "pruned": "pruned",
    "failed": "failed",
    "interrupted": "interrupted",
}


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


def encode_row(table: str, row: dict[str, Any]) -> dict[str, Any]:
    """Keep only the table's columns; JSON columns become JSON text; numbers get their column's type."""
    columns = TABLES[table]
    unknown = set(row) - set(columns)
    if unknown:
        raise ValueError(f"{table} has no column(s) {sorted(unknown)}; columns are {list(columns)}")
    encoded = {}
    for name, value in row.items():
        kind = columns[name]
        if value is None:
            encoded[name] = None
        elif kind == JSON:
            encoded[name] = json.dumps(value, default=str, sort_keys=True)
        else:
            encoded[name] = kind(value)
    return encoded


def decode_row(table: str, row: dict[str, Any]) -> dict[str, Any]:
    columns = TABLES[table]
    return {
        name: (json.loads(value) if columns.get(name) == JSON and isinstance(value, str) else value)
        for name, value in row.items()
    }


def parse_run_id(run_id: str) -> dict[str, Any]:
    """kind, study_name and trial_number implied by a run id ("<study>/trial-<n>" or "run/<name>-<time>")."""
    head, _, tail = run_id.rpartition("/")
    if tail.startswith("trial-") and tail[6:].isdigit() and head:
        return {"kind": "trial", "study_name": head, "trial_number": int(tail[6:])}
    if head == "run":
        return {"kind": "run"}
    return {}


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
        from hpo.tracking.digest import digest_path

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


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgresql+", "postgres://"))


def open_store(url_or_path: str | Path) -> ExperimentStore:
    """A store at a PostgreSQL URL, a `sqlite:///path` URL, or a plain file path (created with its tables)."""
    text = str(url_or_path)
    if is_postgres_url(text):
        from hpo.tracking.store_postgres import PostgresStore

        return PostgresStore(text)
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :]
    elif "://" in text:
        from hpo.errors import ConfigError

        raise ConfigError(
            f"experiment store {text!r}: unsupported URL; use a file path, sqlite:///path or postgresql://..."
        )
    from hpo.tracking.store_sqlite import SQLiteStore

    return SQLiteStore(text)
