"""A worker's heartbeat for its running trial rides out a storage outage (a PostgreSQL restart: the beat is skipped and
the next one tries again), and whatever else ends the worker's supervision of a trial ends the trial's process too: a
warm trial process left waiting for a next trial made its worker's exit wait for ever (tests/chaos/campaign.py seed 498873,
a PostgreSQL restart under promotion ASHA: the study never completed)."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import sqlite3
from pathlib import Path

import optuna
import pytest
from study_task import write_study

from hpo.scheduling import child
from hpo.scheduling.child import TrialJob, run_trial_processes
from hpo.scheduling.heartbeat import TrialHeartbeat
from hpo.spec import load_spec
from hpo.storage.database import create_storage, dispose_connections
from hpo.storage.study_db import open_study

# Optuna warns that heartbeats belong with Study.optimize; hpo's workers record them themselves.
pytestmark = pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used")


def _study_with_heartbeat(folder: Path) -> tuple[optuna.Study, optuna.Trial]:
    url = f"sqlite:///{folder / 'db' / 'study.db'}"
    (folder / "db").mkdir(parents=True)
    storage = create_storage(url, heartbeat_interval=1, grace_period=5)
    study = optuna.create_study(study_name="beats", storage=storage)
    return study, study.ask()


def _beats(folder: Path) -> int:
    with contextlib.closing(sqlite3.connect(folder / "db" / "study.db")) as db:
        return db.execute("SELECT count(*) FROM trial_heartbeats").fetchone()[0]


def _forget_beats(folder: Path) -> None:
    with contextlib.closing(sqlite3.connect(folder / "db" / "study.db")) as db, db:
        db.execute("DELETE FROM trial_heartbeats")


def test_a_beat_the_storage_cannot_take_is_skipped_once_said_and_the_next_one_records(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    study, trial = _study_with_heartbeat(tmp_path)
    beat = TrialHeartbeat(study, trial)
    beat()
    assert _beats(tmp_path) == 1

    # The database goes away under its open storage: a real OperationalError on the next connection.
    dispose_connections(study._storage)  # noqa: SLF001
    (tmp_path / "db").rename(tmp_path / "away")
    with caplog.at_level(logging.WARNING, logger="hpo.scheduling.heartbeat"):
        beat()
        beat()
    assert beat.missed == 2
    [said] = [
        r.getMessage() for r in caplog.records if r.name == "hpo.scheduling.heartbeat"
    ]  # once, not per beat
    assert f"trial {trial.number}: its heartbeat could not be recorded (" in said
    assert "unable to open database file" in said  # the cause at the bottom, not Optuna's wrapper

    (tmp_path / "away").rename(tmp_path / "db")
    _forget_beats(tmp_path)
    beat()
    assert beat.missed == 0 and _beats(tmp_path) == 1  # recorded again once the database is back


def test_an_error_that_ends_supervision_ends_the_warm_trial_process(tmp_path: Path) -> None:
    # use_cpu: the trial must outlast the first heartbeat. With a GPU present (an H200, pytest-xdist, 2026-11-29) its
    # result came first and nothing raised; likely cause: an earlier test had started CUDA in this process, and a
    # trial forked from it fails at its first CUDA call
    training = {"max_steps": 400, "save_strategy": "no", "use_cpu": True}
    spec = load_spec(write_study(tmp_path, training=training))
    study = open_study(spec)
    trial = study.ask()
    job = TrialJob(
        spec=spec,
        study=study,
        trial=trial,
        params={},
        resume_from=None,
        ranks=1,
        threads=1,
        worker_pid=os.getpid(),
        exit_in_background=True,
        keep_warm=True,
    )
    started: list[int] = []

    def failing_beat() -> None:
        raise RuntimeError("the heartbeat failed")

    with pytest.raises(RuntimeError, match="the heartbeat failed"):
        run_trial_processes(job, failing_beat, lambda: 0, 0.0, on_start=started.extend)
    assert len(started) == 1
    assert (
        multiprocessing.active_children() == []
    )  # killed and joined: nothing for the worker's exit to wait on
    assert child._warm == []  # noqa: SLF001 - no warm process kept for a next trial
