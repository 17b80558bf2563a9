"""The experiment store: every run and trial, its metrics, events and artifacts, in four tables.

The same tables and columns live in a SQLite file (sqlite-utils, WAL, busy timeout) or in a PostgreSQL database
(SQLAlchemy), so that a study whose Optuna storage is PostgreSQL keeps its experiment records in the same database and
workers on many machines write to one place. Dashboards and `hpo export` read them through `open_store(...)`.

    schema.py    tables, columns, indexes, row encoding, run ids
    base.py      `ExperimentStore` (the interface) and `Batch`
    sqlite.py    `SQLiteStore`;  postgres.py: `PostgresStore` (imported by `open_store` for a PostgreSQL URL only)

The factory lives here, as Optuna's `storages/__init__.py::get_storage` does, so the base never imports a backend.
"""

from __future__ import annotations

from pathlib import Path

from hpo.errors import ConfigError
from hpo.storage.urls import is_postgres_url
from hpo.tracking.store.base import Batch, ExperimentStore, event_batch
from hpo.tracking.store.schema import EVENT_KINDS, TABLES, trial_run_id
from hpo.tracking.store.sqlite import SQLiteStore

__all__ = [
    "EVENT_KINDS",
    "TABLES",
    "Batch",
    "ExperimentStore",
    "SQLiteStore",
    "event_batch",
    "open_store",
    "trial_run_id",
]


def open_store(url_or_path: str | Path) -> ExperimentStore:
    """A store at a PostgreSQL URL, a `sqlite:///path` URL, or a plain file path (created with its tables)."""
    text = str(url_or_path)
    if is_postgres_url(text):
        # Imported here: SQLAlchemy's PostgreSQL dialect takes 0.15 s to import, which every trial process and
        # worker would pay on the embedded (SQLite) default.
        from hpo.tracking.store.postgres import PostgresStore

        return PostgresStore(text)
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :]
    elif "://" in text:
        raise ConfigError(
            f"experiment store {text!r}: unsupported URL; use a file path, sqlite:///path or postgresql://..."
        )
    return SQLiteStore(text)
