"""Events the study manager and the scheduler record outside the training loop: pruned, failed, retried, resumed,
interrupted (and completed). A store that is down costs the event, never the study: failures are logged, not raised.

    from hpo.tracking.events import record_event
    record_event(spec, run_id, "retried", "worker 2 died; resuming from checkpoint-40", {"from_trial": 3})
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

from hpo.spec import Spec, StudySpec
from hpo.tracking.store import ExperimentStore, open_store

logger = logging.getLogger(__name__)


def store_location(spec: Spec) -> str | None:
    """Where a run or study file's experiment store lives, or None when `tracking.store` is false.

    A study whose storage is PostgreSQL keeps its store in the same database; otherwise the store is the SQLite file
    `<output_dir>/experiments.db` of the study (or of the run). `tracking.store` may also name a path or URL.
    """
    setting = spec.tracking.store
    if setting is False:
        return None
    if isinstance(setting, str):
        return setting
    if isinstance(spec, StudySpec):
        return spec.store_url  # the same PostgreSQL database as the study, or experiments.db beside it
    return str(Path(spec.output_dir or Path("runs") / (spec.name or "run")) / "experiments.db")


def record_event(
    spec_or_store: Spec | ExperimentStore | str | Path,
    run_id: str,
    kind: str,
    message: str = "",
    data: dict[str, Any] | None = None,
) -> bool:
    """Record one event for `run_id` in the store of a spec, a store URL/path, or an open store. True when written."""
    if isinstance(spec_or_store, ExperimentStore):
        return _record(spec_or_store, run_id, kind, message, data)
    location = spec_or_store if isinstance(spec_or_store, str | Path) else store_location(spec_or_store)
    if location is None:
        return False
    try:
        store = open_store(location)
    except Exception as error:
        logger.warning("could not record %s event for %s: %s", kind, run_id, error)
        return False
    try:
        return _record(store, run_id, kind, message, data)
    finally:
        store.close()


class KeptOpenEvents:
    """`record_event` for one process that records many events (a worker: a pause, a retry, per trial): the store stays
    open between them rather than being opened, its schema checked and closed for each (about 7 ms of CPU a PBT pause,
    beside the trials). A failed write closes it, so the next event opens it afresh (a PostgreSQL that restarted).
    Bound to the process that opened it: a forked child that records opens its own."""

    def __init__(self, spec: Spec) -> None:
        self.location = store_location(spec)
        self._store: ExperimentStore | None = None
        self._pid = 0

    def record(self, run_id: str, kind: str, message: str = "", data: dict[str, Any] | None = None) -> bool:
        if self.location is None:
            return False
        if self._store is None or self._pid != os.getpid():
            try:
                self._store, self._pid = open_store(self.location), os.getpid()
            except Exception as error:
                logger.warning("could not record %s event for %s: %s", kind, run_id, error)
                return False
        written = _record(self._store, run_id, kind, message, data)
        if not written:
            self.close()
        return written

    def close(self) -> None:
        store, self._store = self._store, None
        if store is not None and self._pid == os.getpid():
            with contextlib.suppress(Exception):  # a store that failed may fail to close too
                store.close()


def _record(
    store: ExperimentStore, run_id: str, kind: str, message: str, data: dict[str, Any] | None
) -> bool:
    try:
        store.record_event(run_id, kind, message, data)
        return True
    except ValueError:
        raise  # an unknown kind is a bug in the caller
    except Exception as error:
        logger.warning("could not record %s event for %s: %s", kind, run_id, error)
        return False
