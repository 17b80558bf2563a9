"""The experiment store in a SQLite file, through sqlite-utils.

Parallel workers (processes) write to one file: WAL lets readers run beside the writer, every write batch takes the write
lock up front (BEGIN IMMEDIATE, so a reader never has to upgrade and deadlock), and a busy timeout plus a few retries
wait out the other writers instead of failing with "database is locked".
"""

from __future__ import annotations

import random
import sqlite3
import time
from pathlib import Path
from typing import Any

import sqlite_utils

from hpo.tracking.store.base import Batch, ExperimentStore
from hpo.tracking.store.schema import ADDED_COLUMNS, INDEXES, JSON, TABLES, encode_row

BUSY_TIMEOUT_S = 60.0
_RETRIES = 8


def _sqlite_type(kind: Any) -> Any:
    return str if kind == JSON else kind


class SQLiteStore(ExperimentStore):
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, check_same_thread=False)
        # No sqlite-utils plugins: the store defines no SQL functions, and loading them scans every installed
        # package's entry points (about 20 ms in each new process, so in every trial).
        self.db = sqlite_utils.Database(conn, execute_plugins=False)
        _retry_locked(self._create_schema)

    def _create_schema(self) -> None:
        if self.db.journal_mode != "wal":
            self.db.enable_wal()
        for table, columns in TABLES.items():
            types = {name: _sqlite_type(kind) for name, kind in columns.items()}
            pk = "id" if table == "hpo_runs" else None
            self.db[table].create(types, pk=pk, if_not_exists=True)
            present = set(self.db[table].columns_dict)
            for name in ADDED_COLUMNS.get(table, []):
                if name not in present:  # a store written by an older version
                    self.db[table].add_column(name, types[name])
            for index in INDEXES.get(table, []):
                self.db[table].create_index(index, if_not_exists=True)

    def write(self, batch: Batch) -> None:
        if len(batch):
            _retry_locked(lambda: self._write_once(batch))

    def _write_once(self, batch: Batch) -> None:
        self.db.conn.execute("BEGIN IMMEDIATE")
        try:
            for row in batch.runs:
                self._upsert_run(encode_row("hpo_runs", row))
            for table in ("metrics", "events", "artifacts"):
                rows = [encode_row(f"hpo_{table}", row) for row in getattr(batch, table)]
                if rows:
                    self.db[f"hpo_{table}"].insert_all(rows, batch_size=500)
            self.db.conn.execute("COMMIT")
        except BaseException:
            if self.db.conn.in_transaction:
                self.db.conn.execute("ROLLBACK")
            raise

    def _upsert_run(self, row: dict[str, Any]) -> None:
        # Only the given columns change; a later upsert never erases what an earlier one wrote.
        columns = list(row)
        updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c != "id") or "id = id"
        self.db.execute(
            f"INSERT INTO hpo_runs ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)}) "
            f"ON CONFLICT(id) DO UPDATE SET {updates}",
            [row[c] for c in columns],
        )

    def _select(self, table: str, where: dict[str, Any], order_by: list[str]) -> list[dict[str, Any]]:
        clause = " AND ".join(f"{column} = ?" for column in where) or None
        return list(self.db[table].rows_where(clause, list(where.values()), order_by=", ".join(order_by)))

    def close(self) -> None:
        self.db.close()


def _retry_locked(action: Any) -> Any:
    """Run `action`, retrying with jittered backoff while another process holds the lock past the busy timeout."""
    for attempt in range(_RETRIES):
        try:
            return action()
        except sqlite3.OperationalError as error:
            message = str(error).lower()
            if attempt == _RETRIES - 1 or ("locked" not in message and "busy" not in message):
                raise
            time.sleep(min(2.0, 0.05 * 2**attempt) * (1 + random.random()))
    return None
