"""Paused trials in a real SQLite study database: what other processes see, and that a pause is resumed once only."""

from __future__ import annotations

import time

import optuna
import pytest
from optuna.trial import TrialState

from hpo.storage import pause
from hpo.storage.database import create_storage
from hpo.storage.study_db import ask_new, ask_queued, counted_trials, stale_trial_ids, trial_id


@pytest.fixture
def url(tmp_path):
    return f"sqlite:///{tmp_path / 'study.db'}"


@pytest.fixture
def study(url):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = create_storage(url, heartbeat_interval=1, grace_period=2)
    return optuna.create_study(study_name="s", storage=storage, direction="maximize")


def _other_process_view(url: str) -> optuna.Study:
    return optuna.load_study(
        study_name="s", storage=create_storage(url, heartbeat_interval=1, grace_period=2)
    )


def _paused_trial(study, tmp_path, step=4, value=0.5):
    trial = ask_new(study)
    trial.suggest_float("x", 0, 1)
    study._storage.record_heartbeat(trial_id(trial))  # noqa: SLF001 - as a worker does
    pause.record_boundary(study, trial_id(trial), step, value)
    checkpoint = tmp_path / f"trial-{trial.number}" / f"checkpoint-{step}"
    assert pause.pause_trial(study, trial_id(trial), step=step, checkpoint=str(checkpoint), value=value)
    return trial


def test_a_paused_trial_waits_counts_and_is_not_handed_out_as_queued(study, tmp_path, url):
    trial = _paused_trial(study, tmp_path)
    other = _other_process_view(url)
    [frozen] = other.get_trials()
    assert frozen.state == TrialState.WAITING and pause.is_paused(frozen)
    assert pause.pause_info(frozen)["step"] == 4
    assert pause.boundaries(frozen) == {4: 0.5}
    assert counted_trials(other) == 1  # a configuration already started: n_trials counts it
    assert ask_queued(other) is None  # not a queued retry
    assert [t.number for t in pause.paused_trials(other)] == [trial.number]


def test_a_paused_trial_is_not_stale_and_a_resumed_one_beats_at_once(study, tmp_path, url):
    trial = _paused_trial(study, tmp_path)
    time.sleep(3.2)  # longer than the grace period: a RUNNING trial with this old a beat would be stale
    assert stale_trial_ids(study) == []
    resumed = pause.resume_trial(_other_process_view(url), trial_id(trial), {"worker": "elsewhere:1"})
    assert resumed is not None and resumed.number == trial.number
    assert stale_trial_ids(study) == []  # its heartbeat was renewed before it became RUNNING
    frozen = study.get_trials()[0]
    assert frozen.state == TrialState.RUNNING and not pause.is_paused(frozen)
    assert frozen.user_attrs["worker"] == "elsewhere:1"
    assert frozen.system_attrs[pause.RESUMED_AT] == [4]


def test_two_processes_resume_one_paused_trial_once(study, tmp_path, url):
    trial = _paused_trial(study, tmp_path)
    first = pause.resume_trial(_other_process_view(url), trial_id(trial))
    second = pause.resume_trial(_other_process_view(url), trial_id(trial))
    assert (first is None) != (second is None)


def test_a_paused_trial_ends_pruned_with_its_value(study, tmp_path):
    trial = _paused_trial(study, tmp_path, step=12, value=0.75)
    assert pause.end_paused_trial(study, trial_id(trial), TrialState.PRUNED, 0.75)
    frozen = study.get_trials()[0]
    assert frozen.state == TrialState.PRUNED and frozen.value == 0.75
    assert frozen.user_attrs["pruned_step"] == 12
    assert pause.resume_trial(study, trial_id(trial)) is None  # ended: nothing to resume
    assert not pause.end_paused_trial(study, trial_id(trial), TrialState.PRUNED, 0.75)


def test_queued_retries_still_come_first_and_new_trials_are_new(study, tmp_path):
    _paused_trial(study, tmp_path)
    study.enqueue_trial({"x": 0.25})
    queued = ask_queued(study)
    assert queued is not None and queued.suggest_float("x", 0, 1) == 0.25  # the enqueued value
    assert ask_queued(study) is None
    assert ask_new(study).number == 2


@pytest.mark.parametrize("where", ["sqlite", "memory"])
def test_a_pause_of_a_trial_failed_meanwhile_writes_nothing(study, tmp_path, where):
    """All or none: the state, the pause point and the heartbeat go in one transaction (one by one in memory)."""
    study = study if where == "sqlite" else optuna.create_study(direction="maximize")
    trial = ask_new(study)
    study._storage.set_trial_state_values(trial_id(trial), TrialState.FAIL)  # noqa: SLF001 - swept meanwhile
    checkpoint = str(tmp_path / "trial-0" / "checkpoint-4")
    assert not pause.pause_trial(study, trial_id(trial), step=4, checkpoint=checkpoint, value=0.5)
    [frozen] = study.get_trials()
    assert frozen.state == TrialState.FAIL and pause.PAUSED not in frozen.system_attrs
    running = ask_new(study)
    assert pause.pause_trial(study, trial_id(running), step=4, checkpoint=checkpoint, value=0.5)
    assert pause.pause_info(study.get_trials()[1])["checkpoint"] == checkpoint
    assert pause.resume_trial(study, trial_id(running), {"worker": "here:1"}) is not None
    assert study.get_trials()[1].state == TrialState.RUNNING
