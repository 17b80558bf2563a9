"""Riding out a storage outage: a database restart, a failover, a dropped network, a SQLite file locked past its busy
timeout. A call that fails that way is tried again with capped exponential backoff and full jitter (0.5 s doubling to
15 s, each wait drawn uniformly below its cap, so that many workers do not hammer a server that is starting again in
step), until it answers or the outage has lasted `outage_timeout`; then `StorageUnreachable` (exit 75). Any other
error is raised at once.

The outage clock is per process: one outage is logged once when it starts (with its root cause) and once when it ends
(with how long it lasted), however many calls waited on it; its length counts from the first failed call, so a call
that starts late in an outage waits only for what is left. `no_waiting()` makes the calls of a block fail at once (the
outage is still clocked and logged): a trial's report keeps training going and writes later, a heartbeat skips a beat,
the live table reads again next second, and a claim under the claim lock starts again from the lock.

Why 15 minutes by default: a PostgreSQL restart or a managed database's failover takes seconds to a couple of minutes,
a maintenance window rarely more; past a quarter of an hour the database is likely gone for longer than is worth
holding GPUs for, and a clean stop (checkpoints saved, `hpo run` exits 75; the same command continues) is better.
"""

from __future__ import annotations

import contextlib
import logging
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from sqlalchemy import exc

from hpo.errors import StoppedWaiting, StorageUnreachable

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_OUTAGE_TIMEOUT_S = 900.0
FIRST_WAIT_S = 0.5
MOST_WAIT_S = 15.0
# Errors that mean the database will not answer this call whoever waits: a wrong password or database name.
_PERMANENT = (
    "password authentication failed",
    "does not exist",
    "no password supplied",
    "authentication failed",
)


def is_unreachable(error: BaseException) -> bool:
    """Whether a database failed to answer (anywhere in the cause chain): the DB-API's OperationalError and
    InterfaceError as SQLAlchemy wraps them (a refused or dropped connection, "database is locked"), sqlite3's own, or
    an earlier StorageUnreachable; not a wrong password or database name, nor a SQLite file that cannot be opened. Optuna's StorageInternalError alone is not enough: it also wraps a constraint or a
    type error, which no waiting cures."""
    kinds = (exc.OperationalError, exc.InterfaceError, exc.DisconnectionError, sqlite3.OperationalError)
    seen: BaseException | None = error
    for _ in range(10):  # a cause chain is short; a cycle in one must not loop for ever
        if seen is None:
            return False
        if isinstance(seen, StorageUnreachable):
            return True
        if isinstance(seen, kinds):
            return _passing(seen)
        seen = seen.__cause__ or seen.__context__
    return False


def _passing(error: BaseException) -> bool:
    """Whether a database's error will pass with waiting. SQLite's OperationalError also means a path it cannot open, a
    read-only file or a missing table: only a lock held past the busy timeout passes."""
    orig = getattr(error, "orig", None)  # the driver's own error under SQLAlchemy's
    if isinstance(error, sqlite3.Error) or isinstance(orig, sqlite3.Error):
        text = str(orig if orig is not None else error)
        return "locked" in text or "busy" in text
    return not any(word in str(error) for word in _PERMANENT)


def root_cause(error: BaseException) -> str:
    """The first line of what caused `error` at the bottom ("connection refused"), not a wrapper's."""
    for _ in range(10):  # the explicit causes: a context may be an unrelated error handled on the way
        if error.__cause__ is None:
            break
        error = error.__cause__
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else type(error).__name__


def backoff_caps(first: float = FIRST_WAIT_S, most: float = MOST_WAIT_S) -> Iterator[float]:
    """The caps of successive waits: `first`, doubling, never above `most`."""
    cap = first
    while True:
        yield cap
        cap = min(most, cap * 2)


def jittered(cap: float) -> float:
    """Full jitter: a wait drawn uniformly in [0, cap]; at least a millisecond, so no retry spins."""
    return max(0.001, random.uniform(0.0, cap))


class OutageClock:
    """This process's view of the storage: since when it has not answered (None: it answers), and how long the
    outages so far lasted. `timeout` is `storage.outage_timeout`, set once per process (`set_timeout`)."""

    def __init__(self, timeout: float = DEFAULT_OUTAGE_TIMEOUT_S, service: str = "storage") -> None:
        self.timeout, self.service = timeout, service
        self.since: float | None = None  # time.monotonic() of the first failed call of the current outage
        self.ended_at: float | None = None  # when the last outage ended
        self.outages: list[float] = []  # the length of each outage that ended, seconds
        self.quiet = False  # clocked, not logged: a caller that says it its own way (`hpo run`'s live view)
        self._lock = threading.Lock()

    def failed(self, error: BaseException, what: str) -> None:
        with self._lock:
            if self.since is not None:
                return
            self.since = time.monotonic()
        if self.quiet:
            return
        logger.warning(
            "%s unreachable (%s, while it would %s); waiting, up to %s",
            self.service,
            root_cause(error),
            what,
            describe_seconds(self.timeout),
        )

    def answered(self) -> None:
        with self._lock:
            if self.since is None:
                return
            lasted = time.monotonic() - self.since
            self.since, self.ended_at = None, time.monotonic()
            self.outages.append(lasted)
        if self.quiet:
            return
        logger.warning("%s back after %s", self.service, describe_seconds(lasted))

    def down_for(self) -> float:
        since = self.since
        return 0.0 if since is None else time.monotonic() - since

    def expired(self) -> bool:
        return self.since is not None and self.down_for() >= self.timeout

    def settling(self, seconds: float) -> bool:
        """Whether the storage is down, or came back less than `seconds` ago. Trials' heartbeats could not be written
        during an outage: until every worker had a chance to beat again, none of them looks stale."""
        if self.since is not None:
            return True
        return self.ended_at is not None and time.monotonic() - self.ended_at < seconds

    def describe(self) -> str:
        return "the study's storage" if self.service == "storage" else f"the {self.service}"

    def unreachable(self) -> StorageUnreachable:
        return StorageUnreachable(f"{self.describe()} was unreachable for {describe_seconds(self.timeout)}")


clock = OutageClock()  # the study's database
store_clock = OutageClock(service="object store")  # study.output_dir: s3://... (hpo.storage.remote)
_local = threading.local()


def _database_clock() -> OutageClock:
    return clock  # looked up at each call: a test may give the process a fresh one


def set_timeout(seconds: float) -> None:
    """`storage.outage_timeout` for every storage and object-store call of this process (and the trial processes it
    forks)."""
    clock.timeout = store_clock.timeout = float(seconds)


@contextlib.contextmanager
def no_waiting() -> Iterator[None]:
    """Calls in this block (this thread) fail at once on an outage, with the database's own error."""
    outer = getattr(_local, "no_waiting", False)
    _local.no_waiting = True
    try:
        yield
    finally:
        _local.no_waiting = outer


def waiting_allowed() -> bool:
    return not getattr(_local, "no_waiting", False)


_stop_asked: list[
    Callable[[], bool]
] = []  # this process's stop requests (a worker's SIGTERM, `hpo run`'s Ctrl-C)


@contextlib.contextmanager
def stop_waiting_when(asked: Callable[[], bool]) -> Iterator[None]:
    """While in this block, a call that meets an outage once `asked()` is true fails with `StoppedWaiting` instead of
    waiting: a stop asked for during a long outage (a preemption's SIGTERM, a Ctrl-C) is honoured in seconds, not when
    the storage answers again or `outage_timeout` passes (tests/chaos seed 513556: a SIGTERMed run still waited after
    145 s)."""
    _stop_asked.append(asked)
    try:
        yield
    finally:
        _stop_asked.remove(asked)


def stop_asked() -> bool:
    return any(asked() for asked in _stop_asked)


def ride(
    call: Callable[[], T],
    what: str,
    unreachable: Callable[[BaseException], bool] | None = None,
    on: OutageClock | None = None,
) -> T:
    """`call()`, tried again while the storage does not answer (see the module's docstring). `what` names the call
    in the log line ("record a heartbeat"). `unreachable` and `on`: another service's test and clock (the object
    store's: hpo.storage.remote)."""
    unreachable = unreachable or is_unreachable
    clock = on or _database_clock()
    caps = backoff_caps()
    while True:
        try:
            result = call()
        except Exception as error:
            if not unreachable(error):
                raise
            clock.failed(error, what)
            if isinstance(error, StorageUnreachable) or not waiting_allowed():
                raise
            if clock.expired():
                raise clock.unreachable() from error
            if stop_asked():
                raise StoppedWaiting(
                    f"stopped while {clock.describe()} did not answer ({root_cause(error)})"
                ) from error
            time.sleep(min(jittered(next(caps)), max(0.001, clock.timeout - clock.down_for())))
            continue
        clock.answered()
        return result


def describe_seconds(seconds: float) -> str:
    """`15 min`, `2 min 30 s`, `45 s`: a duration for a log line or a message."""
    whole = int(round(seconds))
    minutes, rest = divmod(whole, 60)
    if not minutes:
        return f"{whole} s"
    return f"{minutes} min" + (f" {rest} s" if rest else "")
