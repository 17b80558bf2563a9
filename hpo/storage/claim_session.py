"""The server session that holds this thread's claim lock on PostgreSQL, so that a trial is created only while the
lock is still held.

The claim lock (hpo.storage.database.claim_lock) is an advisory lock of one connection's session, while the claim's
reads and writes go through the storage's other pooled connections. A server restart ends that session and frees the
lock; if it comes back between two calls of the block, pre-ping gives those calls fresh connections, and the block
would go on unlocked while another worker takes the lock and counts the same trials: one trial more than n_trials
(tests/chaos seed 12209: a PBT study of 4 members ended 5, an `hpo worker` beside `hpo run`, PostgreSQL restarted).
So each new trial first asks the lock's own session who it is (`confirm_held`): it fails when the session is gone or
is another, and the claim starts again from the lock. A restart between that answer and the insert cannot hand the lock to
another worker in time: the insert runs on a server that is shutting down, or fails.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

from sqlalchemy import Connection, exc, text

_local = threading.local()


@contextlib.contextmanager
def holding(connection: Connection) -> Iterator[None]:
    """While in this block, this thread's claim lock lives in `connection`'s session (which has just taken it)."""
    outer = getattr(_local, "held", None)
    _local.held = (connection, _session_pid(connection), os.getpid())
    try:
        yield
    finally:
        _local.held = outer


def confirm_held() -> None:
    """Raise if the session holding this thread's claim lock has ended; nothing when the thread holds no lock on
    PostgreSQL (a file lock on SQLite is the kernel's and cannot be lost). A session that ended shows as an error on
    its connection, or, once SQLAlchemy has connected it again, as another server process: a new session, without the
    lock. Both are raised as a disconnection, so the claim's `outage.ride` starts again from the lock."""
    held = getattr(_local, "held", None)
    if held is None or held[2] != os.getpid():  # a forked process holds nothing of its parent's
        return
    connection, pid, _ = held
    if _session_pid(connection) != pid:
        raise exc.DisconnectionError(
            "the session holding the claim lock ended (a server restart or a dropped connection)"
        )


def _session_pid(connection: Connection) -> int:
    return int(connection.execute(text("SELECT pg_backend_pid()")).scalar_one())
