"""Optuna storages that hold up under parallel workers.

SQLite (the embedded default): Optuna's RDBStorage on a database in WAL mode, where every transaction starts with
`BEGIN IMMEDIATE` and waits on a busy timeout. Why: with SQLite's default *deferred* transactions, a reader that later
wants to write fails at once with "database is locked" when another process wrote in between (the busy handler is not
even called), which is exactly what parallel Optuna workers do. Taking the write lock up front turns those failures into
short waits; a BEGIN that still times out is retried with back-off. Measured in `tests/hpo/test_storage_load.py` and
`bench/overhead/scheduling.py`; JournalStorage was the alternative, but it has no heartbeats, which crash recovery needs.

PostgreSQL (many machines): plain RDBStorage with pre-ping, so connections dropped by the server are replaced, and a
connect timeout, so a server that does not answer at all (a network partition) fails a call in seconds, not minutes.

Every storage returned rides out an outage (hpo.storage.riding, hpo.storage.outage): its calls wait for the database,
up to `storage.outage_timeout`, and so does opening it (a worker restarted during an outage).

`claim_lock(storage)` serialises "count the trials, then ask" across processes and machines, so n_trials is never
exceeded: an advisory lock on PostgreSQL, an fcntl lock beside the SQLite file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import random
import sqlite3
import threading
import time
import warnings
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import BaseStorage, RDBStorage
from optuna.trial import FrozenTrial
from sqlalchemy import event, exc, text
from sqlalchemy.dialects import plugins as sqlalchemy_plugins
from sqlalchemy.engine import CreateEnginePlugin, Engine

from hpo.errors import ConfigError, HpoError, StorageUnreachable
from hpo.storage import claim_session
from hpo.storage.outage import is_unreachable, no_waiting, ride, root_cause
from hpo.storage.riding import make_riding
from hpo.storage.sqlite_reads import ReadDeferredRDBStorage, only_reading
from hpo.storage.urls import is_postgres_url, is_sqlite_url, redact, sqlite_path, with_postgres_driver

SQLITE_BUSY_TIMEOUT_S = 30.0
SQLITE_BEGIN_RETRIES = 8
_PLUGIN_NAME = "hpo_sqlite_immediate"
POSTGRES_CONNECT_TIMEOUT_S = 10
_POSTGRES_ENGINE = {"pool_pre_ping": True, "connect_args": {"connect_timeout": POSTGRES_CONNECT_TIMEOUT_S}}
_claim_locks = threading.local()  # the claim locks each thread holds: claim_lock is re-entrant

StaleTrialCallback = Callable[[optuna.Study, FrozenTrial], None]


def create_storage(
    url: str,
    *,
    heartbeat_interval: int | None = None,
    grace_period: int | None = None,
    stale_trial_callback: StaleTrialCallback | None = None,
) -> BaseStorage:
    """An Optuna storage for `url` (sqlite:///path, postgresql://...), with heartbeats when an interval is given."""
    if not isinstance(url, str) or "://" not in url:
        raise ConfigError(
            f"study.storage: {url!r} is not a storage URL; use sqlite:///path/study.db or postgresql://user@host/db"
        )
    heartbeat = _heartbeat_kwargs(heartbeat_interval, grace_period, stale_trial_callback)
    if is_sqlite_url(url):
        return _sqlite_storage(url, heartbeat)
    if is_postgres_url(url):
        return _open_rdb(with_postgres_driver(url), _POSTGRES_ENGINE, heartbeat)
    if url.startswith(("mysql:", "mysql+")):
        return _open_rdb(url, {"pool_pre_ping": True}, heartbeat)
    raise ConfigError(
        f"study.storage: unsupported storage URL {url!r}; use sqlite:///... or postgresql://..."
    )


def _heartbeat_kwargs(
    interval: int | None, grace: int | None, callback: StaleTrialCallback | None
) -> dict[str, Any]:
    if interval is None:
        return {}
    interval = max(1, int(round(interval)))
    grace = max(interval + 1, int(round(grace if grace is not None else 3 * interval)))
    return {"heartbeat_interval": interval, "grace_period": grace, "heartbeat_stale_trial_callback": callback}


def _sqlite_storage(url: str, heartbeat: dict[str, Any]) -> RDBStorage:
    path = sqlite_path(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    _register_sqlite_plugin()
    engine_kwargs = {"plugins": [_PLUGIN_NAME], "connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}}
    return make_riding(_make_immediate(_open_rdb(url, engine_kwargs, heartbeat)))


def _open_rdb(url: str, engine_kwargs: dict[str, Any], heartbeat: dict[str, Any]) -> RDBStorage:
    """The storage, once the database answers (an outage is waited out, up to `storage.outage_timeout`)."""
    last_error: Exception | None = None
    for attempt in range(5):  # several processes may create the tables at the same moment
        try:
            opened = ride(lambda: _new_rdb(url, engine_kwargs, heartbeat), f"open {redact(url)}")
            return opened if is_sqlite_url(url) else make_riding(opened)
        except ImportError as error:
            raise HpoError(
                f"cannot open storage {redact(url)}: {error}; pip install 'hpo[postgres]' (psycopg 3)"
            ) from error
        except StorageUnreachable as error:
            raise StorageUnreachable(f"cannot open storage {redact(url)}: {error}") from error
        except Exception as error:  # IntegrityError on a table-creation race; a wrong password
            last_error = error
            time.sleep(0.2 * (attempt + 1))
    raise HpoError(f"cannot open storage {redact(url)}: {root_cause_line(last_error) if last_error else ''}")


def _new_rdb(url: str, engine_kwargs: dict[str, Any], heartbeat: dict[str, Any]) -> RDBStorage:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return RDBStorage(url, engine_kwargs=dict(engine_kwargs), **heartbeat)


# The first line of what caused an error at the bottom (psycopg's "connection refused"), not a wrapper's (Optuna's
# "An exception is raised during the commit ... invalid data", which names no cause and suggests a wrong one).
root_cause_line = root_cause


def is_storage_outage(error: BaseException) -> bool:
    """Whether `error` (or what caused it) says a database could not be reached or gave up on the operation: a
    restart, a dropped connection, a lock held too long. A fault of the machine, not of a trial's configuration."""
    if is_unreachable(error):
        return True
    kinds = (
        optuna.exceptions.StorageInternalError,
        exc.OperationalError,
        exc.InterfaceError,
        sqlite3.OperationalError,
    )
    seen: BaseException | None = error
    for _ in range(10):  # a cause chain is short; a cycle in one must not loop for ever
        if seen is None:
            return False
        if isinstance(seen, kinds):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


# ---- SQLite: BEGIN IMMEDIATE on every transaction ------------------------------------------------------------
class SqliteImmediatePlugin(CreateEnginePlugin):
    """A SQLAlchemy engine plugin: WAL mode, and a write lock taken when each transaction begins (with retries)."""

    def update_url(self, url: Any) -> Any:
        return url

    def engine_created(self, engine: Engine) -> None:
        event.listen(engine, "connect", _on_sqlite_connect)
        event.listen(engine, "begin", _on_sqlite_begin)


def _register_sqlite_plugin() -> None:
    sqlalchemy_plugins.register(_PLUGIN_NAME, __name__, "SqliteImmediatePlugin")


def _on_sqlite_connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
    # Let SQLAlchemy's "begin" event issue BEGIN itself (pysqlite would otherwise begin lazily, deferred).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        _with_lock_retries(lambda: cursor.execute("PRAGMA journal_mode = WAL"))
        cursor.execute(
            "PRAGMA synchronous = NORMAL"
        )  # safe in WAL mode: a crash loses no committed transaction
    finally:
        cursor.close()


def _on_sqlite_begin(connection: Any) -> None:
    # While RDBStorage creates its tables it nests two connections in one thread; an IMMEDIATE begin there would wait
    # on itself. So deferred until `_make_immediate` marks the engine, after the storage is open.
    # A transaction of a read-only storage method (hpo.storage.sqlite_reads) never writes: deferred, it waits on no one.
    immediate = getattr(connection.engine, "_hpo_begin_immediate", False) and not only_reading()
    statement = "BEGIN IMMEDIATE" if immediate else "BEGIN"
    _with_lock_retries(lambda: connection.exec_driver_sql(statement))


def _make_immediate(storage: RDBStorage) -> RDBStorage:
    storage.engine._hpo_begin_immediate = True  # type: ignore[attr-defined]
    storage.__class__ = ReadDeferredRDBStorage  # opened as RDBStorage: its reads begin deferred from now on
    return storage


def _with_lock_retries(statement: Callable[[], Any]) -> Any:
    for attempt in range(SQLITE_BEGIN_RETRIES):
        try:
            return statement()
        except Exception as error:  # sqlite3.OperationalError, or SQLAlchemy's wrapper of it
            if "locked" not in str(error) and "busy" not in str(error) or attempt == SQLITE_BEGIN_RETRIES - 1:
                raise
            time.sleep(random.uniform(0.05, 0.3) * (attempt + 1))
    return None


# ---- claiming a trial under a lock shared by every worker of the study -----------------------------------------
@contextlib.contextmanager
def claim_lock(storage: BaseStorage, study_name: str, fallback_dir: Path | None = None) -> Iterator[None]:
    """Hold a lock shared by all processes (and machines, on PostgreSQL) working on `study_name`.

    Re-entrant within a thread: a step that must run under the lock (queueing a retry, hpo.storage.retry) takes it
    whether or not its caller already holds it (the workers' sweeps do, the pool's `on_death` does not). Another
    thread of the same process waits, as another process does."""
    rdb = unwrap_rdb(storage)
    url = rdb.url if rdb is not None else ""
    path = sqlite_path(url)
    lock_file = (
        path.with_name(path.name + ".claim.lock") if path else (fallback_dir or Path(".")) / ".claim.lock"
    )
    # With the pid: a process forked while its parent held the lock does not hold it.
    key = (url if is_postgres_url(url) else str(lock_file.resolve()), study_name, os.getpid())
    held = _held_locks()
    if key in held:
        yield
        return
    if is_postgres_url(url):
        # The lock lives in a server session: an outage inside the block ends the session and frees the lock, so the
        # block's calls fail at once rather than wait and go on unlocked; the caller starts again from the lock.
        lock: contextlib.AbstractContextManager[None] = _postgres_advisory_lock(rdb, study_name)
    else:
        lock = _file_lock(lock_file)
    with lock, no_waiting() if is_postgres_url(url) else contextlib.nullcontext():
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)


def _held_locks() -> set[tuple[str, str, int]]:
    """The claim locks this thread holds."""
    if not hasattr(_claim_locks, "held"):
        _claim_locks.held = set()
    return _claim_locks.held


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def _postgres_advisory_lock(rdb: RDBStorage, study_name: str) -> Iterator[None]:
    key = _advisory_key(study_name)
    with rdb.engine.connect() as connection:
        connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": key})
        try:
            with claim_session.holding(connection):
                yield
        finally:
            try:
                connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
                connection.commit()
            except Exception as error:
                if not (is_unreachable(error) or isinstance(error, exc.PendingRollbackError)):
                    raise
                # The server dropped the session, and the lock with it: nothing to release (SQLAlchemy refuses the
                # unlock on a connection whose transaction the drop invalidated: PendingRollbackError).


def _advisory_key(study_name: str) -> int:
    digest = hashlib.sha256(f"hpo-claim:{study_name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True) ^ zlib.crc32(b"hpo")


def unwrap_rdb(storage: BaseStorage) -> RDBStorage | None:
    """The RDBStorage under Optuna's cache wrapper, or None for other storages."""
    inner = getattr(storage, "_backend", storage)
    return inner if isinstance(inner, RDBStorage) else None


def dispose_connections(storage: BaseStorage) -> None:
    """Drop pooled connections, e.g. before fork, so that no child shares a database socket with its parent."""
    rdb = unwrap_rdb(storage)
    if rdb is not None:
        rdb.engine.dispose()
