"""Riding out a storage outage (hpo.storage.outage): a real SQLite file whose write lock another connection holds past the
busy timeout is an outage a user sees ("database is locked"); the call waits and succeeds once the lock is let go, or
stops with StorageUnreachable after storage.outage_timeout. A trial's reports kept meanwhile are written in order, once.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from hpo.errors import StoppedWaiting, StorageUnreachable
from hpo.storage import database, outage
from hpo.storage.database import create_storage
from hpo.trial.pruning import OptunaPruningCallback
from hpo.trial.run import TrialOutcome, record_outcome
from trainer import TrainerControl, TrainerState


@pytest.fixture(autouse=True)
def fresh_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process's own outage clock, and a busy timeout short enough that a held lock fails a call in a moment."""
    monkeypatch.setattr(outage, "clock", outage.OutageClock())
    monkeypatch.setattr(database, "SQLITE_BUSY_TIMEOUT_S", 0.2)
    monkeypatch.setattr(database, "SQLITE_BEGIN_RETRIES", 1)


@contextmanager
def write_lock_held(path: Path, seconds: float) -> Iterator[None]:
    """Another connection holds the database's write lock for `seconds` (from a thread), as a stuck writer would."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(seconds, lambda: holder.execute("COMMIT"))
    release.start()
    try:
        yield
    finally:
        release.join()
        holder.close()


def open_study(tmp_path: Path) -> tuple[optuna.Study, Path]:
    path = tmp_path / "study.db"
    study = optuna.create_study(storage=create_storage(f"sqlite:///{path}"), study_name="outage")
    return study, path


def test_backoff_doubles_to_its_cap_and_jitter_stays_below_it() -> None:
    caps = outage.backoff_caps()
    assert [next(caps) for _ in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 15.0]
    waits = [outage.jittered(2.0) for _ in range(2000)]
    assert all(0.0 < wait <= 2.0 for wait in waits)
    assert min(waits) < 0.2 and max(waits) > 1.8  # spread over the whole range (full jitter), not bunched


def test_a_write_waits_for_a_locked_database_and_the_outage_is_logged_twice(tmp_path, caplog) -> None:
    study, path = open_study(tmp_path)
    caplog.set_level(logging.WARNING, logger="hpo.storage.outage")
    started = time.monotonic()
    with write_lock_held(path, 2.5):
        study.set_user_attr("written", "after the lock")  # waits for the lock instead of raising
    waited = time.monotonic() - started
    assert study.user_attrs["written"] == "after the lock"
    assert waited >= 2.4
    lines = [r.getMessage() for r in caplog.records if r.name == "hpo.storage.outage"]
    assert len(lines) == 2, lines  # once when it starts, once when it ends, however many tries in between
    assert lines[0].startswith("storage unreachable (database is locked") and "up to 15 min" in lines[0]
    assert lines[1].startswith("storage back after ")
    assert outage.clock.outages and 1.5 < outage.clock.outages[0] < waited + 0.1


def test_past_the_outage_timeout_the_call_stops_with_its_own_error(tmp_path) -> None:
    study, path = open_study(tmp_path)
    outage.set_timeout(1.0)
    started = time.monotonic()
    with write_lock_held(path, 3.0):
        with pytest.raises(StorageUnreachable) as raised:
            study.set_user_attr("never", "written")
        assert 0.9 < time.monotonic() - started < 2.0
    assert str(raised.value) == "the study's storage was unreachable for 1 s"
    assert raised.value.exit_code == 75
    assert "never" not in study.user_attrs


@pytest.mark.slow  # 11 s on 2 cores: run by .ci/run's slow suite
def test_a_stop_asked_during_an_outage_ends_the_wait_at_once(tmp_path) -> None:
    """A stop (a worker's SIGTERM) during a wait: the call gives up at its next try, with exit 130, instead of
    waiting out the 15-minute timeout; nothing is written."""
    study, path = open_study(tmp_path)
    asked = threading.Event()
    threading.Timer(1.0, asked.set).start()
    started = time.monotonic()
    with write_lock_held(path, 8.0), outage.stop_waiting_when(asked.is_set):
        with pytest.raises(StoppedWaiting) as raised:
            study.set_user_attr("never", "written")
        gave_up_after = time.monotonic() - started
    assert 1.0 < gave_up_after < 4.0, gave_up_after
    assert str(raised.value) == "stopped while the study's storage did not answer (database is locked)"
    assert raised.value.exit_code == 130
    assert "never" not in study.user_attrs
    with write_lock_held(path, 1.5):  # out of the block, the same outage is waited out again
        study.set_user_attr("written", "after the lock")
    assert study.user_attrs["written"] == "after the lock"


def test_an_error_that_is_not_an_outage_is_raised_at_once(tmp_path) -> None:
    study, _ = open_study(tmp_path)
    started = time.monotonic()
    with pytest.raises(KeyError):
        study._storage.get_study_id_from_name("no such study")  # noqa: SLF001
    assert time.monotonic() - started < 0.5
    assert outage.clock.since is None


def test_a_failed_open_is_waited_for_then_succeeds(tmp_path) -> None:
    """A worker restarted during an outage opens the storage once the database answers again."""
    _, path = open_study(tmp_path)
    with write_lock_held(path, 2.0):
        storage = create_storage(
            f"sqlite:///{path}"
        )  # a new engine: WAL switch and table check need the lock
    assert storage.get_study_id_from_name("outage") >= 0


def evaluate(callback: OptunaPruningCallback, step: int, value: float) -> TrainerControl:
    state, control = TrainerState(), TrainerControl()
    state.global_step = step
    callback.on_evaluate(None, state, control, metrics={"eval_loss": value})
    return control


def test_reports_are_kept_while_the_storage_is_down_and_written_in_order_once(tmp_path, caplog) -> None:
    study, path = open_study(tmp_path)
    trial = study.ask()
    # A pruner that would stop the trial at any report it is asked about: it must not be asked during the outage.
    study.pruner = optuna.pruners.ThresholdPruner(upper=0.0)
    callback = OptunaPruningCallback(trial, metric="eval_loss")
    caplog.set_level(logging.WARNING)
    started = time.monotonic()
    with write_lock_held(path, 2.0):
        for step, value in ((1, 0.9), (2, 0.8), (3, 0.7)):
            assert not evaluate(callback, step, value).should_training_stop
        during = time.monotonic() - started
    assert during < 2.5  # training did not wait for the storage: each report failed in about the busy timeout
    assert callback.kept == [(1, 0.9), (2, 0.8), (3, 0.7)] and callback.kept_total == 3
    assert study.trials[0].intermediate_values == {}
    # The storage answers: the kept reports go first, then this one, and the pruner decides again.
    assert evaluate(callback, 4, 0.6).should_training_stop
    assert callback.kept == []
    stored = study.trials[0].intermediate_values
    assert list(stored.items()) == [(1, 0.9), (2, 0.8), (3, 0.7), (4, 0.6)]
    messages = [r.getMessage() for r in caplog.records]
    assert sum("reports kept until the storage answers" in m for m in messages) == 1, messages
    assert any("3 kept report(s) written" in m for m in messages), messages


def test_reports_still_kept_at_the_end_are_written_before_the_result(tmp_path) -> None:
    study, path = open_study(tmp_path)
    trial = study.ask()
    callback = OptunaPruningCallback(trial, metric="eval_loss")
    with write_lock_held(path, 1.0):
        evaluate(callback, 1, 0.5)
        evaluate(callback, 2, 0.4)
        callback.on_train_end(None, TrainerState(), TrainerControl())  # still down: they stay kept
    assert callback.kept == [(1, 0.5), (2, 0.4)]
    outcome = TrialOutcome(TrialState.COMPLETE, [0.4], None, None, {}, kept_reports=list(callback.kept))
    record_outcome(study, trial, outcome)
    assert outcome.kept_reports == []  # written: a second look at this outcome writes nothing again
    [stored] = study.trials
    assert stored.state == TrialState.COMPLETE and stored.value == 0.4
    assert list(stored.intermediate_values.items()) == [(1, 0.5), (2, 0.4)]


def test_errors_that_waiting_cannot_cure_are_not_taken_for_an_outage(tmp_path) -> None:
    import sqlalchemy

    missing = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'no-such-folder' / 'db.sqlite'}")
    with pytest.raises(sqlalchemy.exc.OperationalError) as cannot_open:
        missing.connect()
    assert not outage.is_unreachable(cannot_open.value)  # a path: it will not open later either
    assert outage.is_unreachable(sqlite3.OperationalError("database is locked"))
    refused = sqlalchemy.exc.OperationalError("connect", {}, Exception("connection refused"))
    wrong = sqlalchemy.exc.OperationalError(
        "connect", {}, Exception('password authentication failed for user "x"')
    )
    assert outage.is_unreachable(refused) and not outage.is_unreachable(wrong)
