"""Parallel workers on one study: no "database is locked", and exactly n_trials trials, on SQLite and PostgreSQL.

Four real processes claim trials through `hpo.scheduling.worker.claim_trial` (the claim lock plus Optuna's ask) and tell plain
Optuna objective values, as fast as they can: the worst case for lock contention."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import uuid
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from hpo.errors import ConfigError
from hpo.storage.database import create_storage
from hpo.storage.urls import redact

WORKERS, TRIALS = 4, 200


def _claim_and_tell(url: str, study_name: str, lock_dir: str, queue: multiprocessing.Queue) -> None:
    from hpo.scheduling.worker import claim_trial

    errors: list[str] = []
    told = 0
    try:
        # Random sampling: the storage is under test, not TPE's cost on 200 trials.
        sampler = optuna.samplers.RandomSampler(seed=os.getpid())
        study = optuna.load_study(study_name=study_name, storage=create_storage(url), sampler=sampler)
        while True:
            trial = claim_trial(study, TRIALS, Path(lock_dir))
            if not isinstance(trial, optuna.Trial):
                break
            x = trial.suggest_float("x", -10, 10)
            study.tell(trial, (x - 2) ** 2)
            told += 1
    except Exception as error:  # noqa: BLE001 - reported to the test, which fails on any
        errors.append(f"{type(error).__name__}: {error}")
    queue.put((told, errors))


def _run_load(url: str, lock_dir: Path) -> tuple[optuna.Study, list[int], list[str]]:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    name = f"load-{uuid.uuid4().hex[:8]}"
    optuna.create_study(study_name=name, storage=create_storage(url))
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    processes = [
        context.Process(target=_claim_and_tell, args=(url, name, str(lock_dir), queue))
        for _ in range(WORKERS)
    ]
    for process in processes:
        process.start()
    results = [queue.get(timeout=240) for _ in processes]
    for process in processes:
        process.join(timeout=30)
    study = optuna.load_study(study_name=name, storage=create_storage(url))
    return study, [told for told, _ in results], [e for _, errors in results for e in errors]


def _assert_exactly(study: optuna.Study, told: list[int], errors: list[str]) -> None:
    assert errors == []
    assert sum(told) == TRIALS
    assert all(n > 0 for n in told), f"every worker should have claimed trials: {told}"
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == TRIALS
    assert all(t.state == TrialState.COMPLETE for t in trials)
    assert sorted(t.number for t in trials) == list(range(TRIALS))


def test_sqlite_four_workers_exactly_200_trials_without_lock_errors(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study, told, errors = _run_load(url, tmp_path)
    _assert_exactly(study, told, errors)


@pytest.mark.postgres
def test_postgres_four_workers_exactly_200_trials(tmp_path, postgres_url):
    study, told, errors = _run_load(postgres_url, tmp_path)
    _assert_exactly(study, told, errors)


def test_sqlite_storage_is_in_wal_mode_and_creates_its_folder(tmp_path):
    path = tmp_path / "deep" / "folder" / "study.db"
    storage = create_storage(f"sqlite:///{path}")
    optuna.create_study(study_name="s", storage=storage)
    assert path.exists()
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_heartbeat_settings_reach_optuna(tmp_path):
    storage = create_storage(f"sqlite:///{tmp_path / 'h.db'}", heartbeat_interval=2.4, grace_period=5)
    assert storage.get_heartbeat_interval() == 2
    assert storage.grace_period == 5


@pytest.mark.parametrize("url", ["not a url", "redis://localhost/0", "/tmp/study.db"])
def test_bad_storage_urls_are_config_errors(url):
    with pytest.raises(ConfigError, match="study.storage"):
        create_storage(url)


def test_redact_hides_the_password():
    assert redact("postgresql://hpo:secret@127.0.0.1:5432/db") == "postgresql://hpo:***@127.0.0.1:5432/db"
    assert redact("sqlite:///x.db") == "sqlite:///x.db"
