"""The experiment store in a PostgreSQL database (the one holding the Optuna study), through SQLAlchemy Core.

Same tables and columns as the SQLite store. Workers on many machines create the tables at the same moment, so table
creation runs under a transaction-scoped advisory lock.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert

from hpo.storage.urls import with_postgres_driver
from hpo.tracking.store.base import Batch, ExperimentStore
from hpo.tracking.store.schema import ADDED_COLUMNS, INDEXES, JSON, TABLES, encode_row

_SQL_TYPES = {str: sa.Text, int: sa.BigInteger, float: sa.Float(precision=53), JSON: sa.Text}
_SCHEMA_LOCK_KEY = 0x6870_6F5F_7374  # "hpo_st": any constant shared by every process


def _metadata() -> sa.MetaData:
    metadata = sa.MetaData()
    for table, columns in TABLES.items():
        sa.Table(
            table,
            metadata,
            *(
                sa.Column(name, _SQL_TYPES[kind], primary_key=(name == "id"))
                for name, kind in columns.items()
            ),
            *(sa.Index(f"ix_{table}_{'_'.join(cols)}", *cols) for cols in INDEXES.get(table, [])),
        )
    return metadata


class PostgresStore(ExperimentStore):
    def __init__(self, url: str) -> None:
        self.url = url
        # A bounded connect timeout: an unreachable server costs a trial's metrics for seconds, not minutes.
        self.engine = sa.create_engine(
            with_postgres_driver(url),
            pool_pre_ping=True,
            pool_size=2,
            max_overflow=2,
            connect_args={"connect_timeout": 10},
        )
        self.metadata = _metadata()
        self.tables = self.metadata.tables
        with self.engine.begin() as conn:
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK_KEY})
            self.metadata.create_all(conn, checkfirst=True)
            for table, names in ADDED_COLUMNS.items():  # a store written by an older version
                for name in names:
                    kind = _SQL_TYPES[TABLES[table][name]]
                    sql_type = (kind() if isinstance(kind, type) else kind).compile(dialect=conn.dialect)
                    conn.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {name} {sql_type}"))

    def write(self, batch: Batch) -> None:
        if not len(batch):
            return
        with self.engine.begin() as conn:
            for row in batch.runs:
                encoded = encode_row("hpo_runs", row)
                statement = pg_insert(self.tables["hpo_runs"]).values(**encoded)
                updates = {c: statement.excluded[c] for c in encoded if c != "id"}
                if updates:
                    conn.execute(statement.on_conflict_do_update(index_elements=["id"], set_=updates))
                else:
                    conn.execute(statement.on_conflict_do_nothing(index_elements=["id"]))
            for table in ("metrics", "events", "artifacts"):
                rows = [encode_row(f"hpo_{table}", row) for row in getattr(batch, table)]
                if rows:
                    conn.execute(self.tables[f"hpo_{table}"].insert(), _uniform(rows, f"hpo_{table}"))

    def _select(self, table: str, where: dict[str, Any], order_by: list[str]) -> list[dict[str, Any]]:
        target = self.tables[table]
        query = sa.select(target).where(*(target.c[k] == v for k, v in where.items()))
        query = query.order_by(*(target.c[c] for c in order_by))
        with self.engine.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    def close(self) -> None:
        self.engine.dispose()


def _uniform(rows: list[dict[str, Any]], table: str) -> list[dict[str, Any]]:
    """executemany needs every row to name the same columns: fill the missing ones with NULL."""
    columns = TABLES[table]
    return [{name: row.get(name) for name in columns} for row in rows]
