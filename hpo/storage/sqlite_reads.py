"""Reads from the SQLite study database without taking its write lock.

Every transaction on the study's SQLite file begins IMMEDIATE (hpo.storage.database): a transaction that reads and
then writes would otherwise fail at once with "database is locked" when another process wrote in between. A
transaction that only reads never upgrades, and in WAL mode a reader neither waits for a writer nor holds one up. Yet
an IMMEDIATE begin made every read (a sampler's or pruner's look at all trials, a PBT claim's look at the population)
queue behind every write of every worker and trial, and each write behind them: about a third of a PBT worker's time
between two segments went to those waits.

`ReadDeferredRDBStorage` is Optuna's RDBStorage whose read-only methods run with `reading()` set, so the begin hook
issues a plain (deferred) BEGIN for them; writes keep BEGIN IMMEDIATE. A read nested in a transaction that has begun
already changes nothing: SQLAlchemy issues one BEGIN per transaction. Its trial reads (all of a study's, or one by
id) build the trials from plain rows (hpo.storage.trial_rows), several times faster than Optuna's ORM objects.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Container, Iterator
from typing import Any

from optuna.storages import RDBStorage
from optuna.storages._rdb.storage import _create_scoped_session
from optuna.trial import FrozenTrial, TrialState

from hpo.storage.trial_rows import read_trial, read_trials

_state = threading.local()


@contextlib.contextmanager
def reading() -> Iterator[None]:
    """Transactions begun in this block (this thread) only read: they begin deferred."""
    outer = getattr(_state, "reading", False)
    _state.reading = True
    try:
        yield
    finally:
        _state.reading = outer


def only_reading() -> bool:
    return getattr(_state, "reading", False)


class ReadDeferredRDBStorage(RDBStorage):
    """RDBStorage whose read-only methods begin deferred transactions (see the module's docstring)."""

    def get_study_id_from_name(self, study_name: str) -> int:
        with reading():
            return super().get_study_id_from_name(study_name)

    def get_study_name_from_id(self, study_id: int) -> str:
        with reading():
            return super().get_study_name_from_id(study_id)

    def get_study_directions(self, study_id: int) -> Any:
        with reading():
            return super().get_study_directions(study_id)

    def get_study_user_attrs(self, study_id: int) -> dict[str, Any]:
        with reading():
            return super().get_study_user_attrs(study_id)

    def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
        with reading():
            return super().get_study_system_attrs(study_id)

    def get_all_studies(self) -> Any:
        with reading():
            return super().get_all_studies()

    def get_trial_user_attrs(self, trial_id: int) -> dict[str, Any]:
        with reading():
            return super().get_trial_user_attrs(trial_id)

    def get_trial_system_attrs(self, trial_id: int) -> dict[str, Any]:
        with reading():
            return super().get_trial_system_attrs(trial_id)

    def get_trial_id_from_study_id_trial_number(self, study_id: int, trial_number: int) -> int:
        with reading():
            return super().get_trial_id_from_study_id_trial_number(study_id, trial_number)

    def get_trial_param(self, trial_id: int, param_name: str) -> float:
        with reading():
            return super().get_trial_param(trial_id, param_name)

    def get_trial(self, trial_id: int) -> FrozenTrial:
        with reading(), _create_scoped_session(self.scoped_session) as session:
            return read_trial(session, trial_id)

    def _get_trials(  # what get_all_trials and Optuna's cache call
        self,
        study_id: int,
        states: Container[TrialState] | None,
        included_trial_ids: set[int],
        trial_id_greater_than: int,
    ) -> list[FrozenTrial]:
        with reading(), _create_scoped_session(self.scoped_session) as session:
            return read_trials(session, study_id, states, included_trial_ids, trial_id_greater_than)

    def get_best_trial(self, study_id: int) -> Any:
        with reading():
            return super().get_best_trial(study_id)

    def _get_best_trial_id(self, *args: Any, **kwargs: Any) -> int:
        with reading():
            return super()._get_best_trial_id(*args, **kwargs)

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        with reading():
            return super()._get_stale_trial_ids(study_id)
