"""hpo's SQLite storage reads trials through SQLAlchemy Core (hpo.storage.trial_rows) and begins read-only
transactions deferred (hpo.storage.sqlite_reads): the trials must be exactly what Optuna's own reader returns, and a
reader must not wait for a writer that holds the database."""

from __future__ import annotations

import math
import sqlite3
import threading
import time
from pathlib import Path

import optuna
import pytest
from optuna.storages import RDBStorage
from optuna.trial import TrialState

from hpo.storage.database import create_storage, unwrap_rdb
from hpo.storage.sqlite_reads import ReadDeferredRDBStorage


def _varied_study(url: str) -> optuna.Study:
    """Trials in every state, with every kind of field Optuna stores, written in an order unlike their keys'."""
    study = optuna.create_study(
        study_name="rows", storage=create_storage(url), directions=["minimize", "maximize"]
    )
    for number in range(5):  # 4 trials RUNNING at the end: number 3, and 4 (asked, never told)
        trial = study.ask()
        trial.suggest_float("lr", 1e-4, 1.0, log=True)
        trial.suggest_int("layers", 1, 4)
        trial.suggest_categorical("act", ["relu", "tanh", None])
        trial.set_user_attr("zeta", {"nested": [number, None, "x"]})
        trial.set_user_attr("alpha", number)
        study._storage.set_trial_system_attr(trial._trial_id, "hpo:lineage", [{"step": 0, "source": None}])
        for step, value in [(40, 0.5), (0, float("nan")), (80, float("inf")), (120, -float("inf"))]:
            study._storage.set_trial_intermediate_value(trial._trial_id, step + number, value)
        if number == 0:
            study.tell(trial, [float("inf"), -1.5])
        elif number == 1:
            study.tell(trial, state=TrialState.PRUNED)
        elif number == 2:
            study.tell(trial, state=TrialState.FAIL)
    study.enqueue_trial({"lr": 0.01})  # 5: WAITING, with a fixed-params system attr
    return study


def _same(ours: list[optuna.trial.FrozenTrial], optunas: list[optuna.trial.FrozenTrial]) -> None:
    assert [t.number for t in ours] == [t.number for t in optunas]
    for mine, theirs in zip(ours, optunas, strict=True):
        for field in (
            "state",
            "datetime_start",
            "datetime_complete",
            "params",
            "distributions",
            "user_attrs",
        ):
            assert getattr(mine, field) == getattr(theirs, field), field
        assert mine.system_attrs == theirs.system_attrs
        assert list(mine.user_attrs) == list(theirs.user_attrs)  # iteration order too
        assert list(mine.intermediate_values) == list(theirs.intermediate_values)
        for step, value in theirs.intermediate_values.items():
            assert mine.intermediate_values[step] == value or (
                math.isnan(value) and math.isnan(mine.intermediate_values[step])
            )
        assert mine.values == theirs.values
        assert mine._trial_id == theirs._trial_id  # noqa: SLF001


@pytest.mark.parametrize(
    ("states", "included", "greater_than"),
    [
        (None, set(), -1),
        ((TrialState.RUNNING, TrialState.WAITING), set(), -1),
        (None, {2, 3}, 3),  # Optuna's cache: some older trials by id, and every newer one
        (None, set(), 3),
        ((TrialState.COMPLETE,), {1, 2, 3}, 2),
    ],
)
def test_trials_read_from_rows_equal_optunas_own(
    tmp_path: Path, states: tuple | None, included: set[int], greater_than: int
) -> None:
    study = _varied_study(f"sqlite:///{tmp_path / 'study.db'}")
    backend = unwrap_rdb(study._storage)
    assert isinstance(backend, ReadDeferredRDBStorage)
    study_id = study._study_id
    ours = backend._get_trials(study_id, states, included, greater_than)
    optunas = RDBStorage._get_trials(backend, study_id, states, included, greater_than)
    assert ours  # every case selects some trials
    _same(ours, optunas)


def test_one_trial_read_from_rows_equals_optunas_own_and_a_missing_one_raises_as_optuna_does(
    tmp_path: Path,
) -> None:
    """`get_trial` is what Optuna's `should_prune` reads the trial's system attributes through, at every report."""
    study = _varied_study(f"sqlite:///{tmp_path / 'study.db'}")
    backend = unwrap_rdb(study._storage)
    ids = [t._trial_id for t in study.get_trials(deepcopy=False)]
    assert len(ids) == 6
    for trial_id in ids:
        _same([backend.get_trial(trial_id)], [RDBStorage.get_trial(backend, trial_id)])
    with pytest.raises(KeyError) as ours:
        backend.get_trial(max(ids) + 1)
    with pytest.raises(KeyError) as optunas:
        RDBStorage.get_trial(backend, max(ids) + 1)
    assert str(ours.value) == str(optunas.value)


def test_a_study_reads_back_through_the_lean_reader(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    _varied_study(url)
    again = optuna.load_study(study_name="rows", storage=create_storage(url))
    states = [t.state for t in again.get_trials(deepcopy=False)]
    running, waiting = TrialState.RUNNING, TrialState.WAITING
    assert states == [TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL, running, running, waiting]
    assert again.trials[0].values == [float("inf"), -1.5]
    assert again.trials[5].system_attrs["fixed_params"] == {"lr": 0.01}


def test_a_study_without_trials_reads_empty_and_a_deleted_one_raises_as_optuna_does(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(study_name="empty", storage=create_storage(url))
    backend = unwrap_rdb(study._storage)
    assert backend._get_trials(study._study_id, None, set(), -1) == []
    optuna.delete_study(study_name="empty", storage=create_storage(url))
    with pytest.raises(KeyError) as ours:
        backend._get_trials(study._study_id, None, set(), -1)
    with pytest.raises(KeyError) as optunas:
        RDBStorage._get_trials(backend, study._study_id, None, set(), -1)
    assert str(ours.value) == str(optunas.value)


def test_a_reader_does_not_wait_for_a_writer_holding_the_database(tmp_path: Path) -> None:
    """Another process holds SQLite's write lock (BEGIN IMMEDIATE, as every hpo write does) for a second: reading
    the trials meanwhile returns at once instead of queueing behind it."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = _varied_study(url)
    holder = sqlite3.connect(tmp_path / "study.db", isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    released = threading.Timer(1.0, holder.execute, args=("COMMIT",))
    released.start()
    try:
        started = time.perf_counter()
        trials = unwrap_rdb(study._storage).get_all_trials(study._study_id)
        waited = time.perf_counter() - started
    finally:
        released.join()
        holder.close()
    assert len(trials) == 6
    assert waited < 0.5
