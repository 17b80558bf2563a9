"""Read the experiment store (tables `hpo_runs`, `hpo_metrics`, `hpo_events`, `hpo_artifacts`; CONTRACTS.md section 6).

Read-only: SQLite through a `mode=ro` URI, PostgreSQL with read-only transactions. A store that does not exist yet, or a
table not created yet, reads as empty: a study whose trials have not logged anything still has a dashboard.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sqlalchemy
from sqlalchemy.exc import SQLAlchemyError

from dashboards.serialize import plain
from hpo.storage.urls import with_postgres_driver
from hpo.tracking.store.schema import JSON, TABLES

# Columns that hold JSON text, from the one schema the writers use.
JSON_COLUMNS = {name for columns in TABLES.values() for name, kind in columns.items() if kind == JSON}
RUN_LIST_COLUMNS = "id, kind, study_name, trial_number, name, status, started_at, ended_at, host, slot, devices, objective, output_dir"


def store_engine(url_or_path: str) -> sqlalchemy.engine.Engine | None:
    """A read-only engine on the store, or None when a SQLite store file does not exist (yet)."""
    if "://" in url_or_path:
        url = sqlalchemy.engine.make_url(with_postgres_driver(url_or_path))
        if not url.drivername.startswith("sqlite"):
            options = {"options": "-c default_transaction_read_only=on"}
            return sqlalchemy.create_engine(url, connect_args=options, pool_pre_ping=True)
        path = Path(url.database or "")
    else:
        path = Path(url_or_path)
    if not path.is_file():
        return None
    return sqlalchemy.create_engine(
        f"sqlite:///file:{path.resolve()}?mode=ro&uri=true",
        connect_args={"timeout": 30},
        poolclass=sqlalchemy.pool.NullPool,
    )


def decode_row(row: dict[str, Any]) -> dict[str, Any]:
    """JSON columns come back as text on SQLite: decode them, and make every value JSON-safe."""
    decoded = {}
    for key, value in row.items():
        if key in JSON_COLUMNS and isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                pass
        decoded[key] = plain(value)
    return decoded


class StoreReader:
    """Queries the dashboard needs. `location` is a SQLite path or a database URL; None means no store."""

    def __init__(self, location: str | None) -> None:
        self.location = location
        self._engine = store_engine(location) if location else None

    def _engine_now(self) -> sqlalchemy.engine.Engine | None:
        # The store may appear after the dashboard started (the first trial creates it).
        if self._engine is None and self.location:
            self._engine = store_engine(self.location)
        return self._engine

    def _rows(self, sql: str, **params: Any) -> list[dict[str, Any]]:
        engine = self._engine_now()
        if engine is None:
            return []
        try:
            with engine.connect() as connection:
                result = connection.execute(sqlalchemy.text(sql), params)
                return [decode_row(dict(row._mapping)) for row in result]
        except SQLAlchemyError:
            # A table the tracking code has not created yet: nothing recorded.
            return []

    def run(self, run_id: str) -> dict[str, Any] | None:
        rows = self._rows("SELECT * FROM hpo_runs WHERE id = :id", id=run_id)
        return rows[0] if rows else None

    def runs(self, kind: str | None = None) -> list[dict[str, Any]]:
        where = "WHERE kind = :kind" if kind else ""
        return self._rows(
            f"SELECT {RUN_LIST_COLUMNS} FROM hpo_runs {where} ORDER BY started_at DESC", kind=kind
        )

    def metrics(self, run_id: str) -> dict[str, dict[str, list[Any]]]:
        """Every metric of a run as columns: {name: {step: [...], value: [...], epoch: [...], time: [...]}}."""
        rows = self._rows(
            "SELECT name, step, epoch, value, time FROM hpo_metrics WHERE run_id = :id ORDER BY name, step, time",
            id=run_id,
        )
        curves: dict[str, dict[str, list[Any]]] = {}
        for row in rows:
            curve = curves.setdefault(row["name"], {"step": [], "value": [], "epoch": [], "time": []})
            for column in ("step", "value", "epoch", "time"):
                curve[column].append(row[column])
        return curves

    def events(self, run_id: str) -> list[dict[str, Any]]:
        return self._rows(
            "SELECT time, kind, message, data FROM hpo_events WHERE run_id = :id ORDER BY time", id=run_id
        )

    def artifacts(self, run_id: str) -> list[dict[str, Any]]:
        return self._rows(
            "SELECT kind, path, sha256, size, step, time FROM hpo_artifacts WHERE run_id = :id ORDER BY time",
            id=run_id,
        )
