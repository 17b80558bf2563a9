"""Resume after `hpo run` is killed with SIGKILL: finished trials stay, the trial left RUNNING is failed and queued
again (resuming from its checkpoint), the file's enqueued trials do not run twice, and n_trials counts the total."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from study_task import write_study

FAST, SLOW = (
    0.0,
    0.15,
)  # seconds of sleep per forward pass: the second trial is slow enough to be killed mid-way


def _hpo_run(path: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "hpo.cli", "run", str(path), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )


def _trials(storage: str) -> list[optuna.trial.FrozenTrial]:
    try:
        return optuna.load_study(study_name="test", storage=storage).get_trials(deepcopy=False)
    except Exception:  # noqa: BLE001 - the database is not there yet
        return []


def _wait_for_running_trial_with_checkpoint(process: subprocess.Popen, storage: str, out: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stdout.read().decode(errors="replace")
        trials = _trials(storage)
        running = [t for t in trials if t.state == TrialState.RUNNING and t.number == 1]
        if running and any((out / "trial-1").glob("checkpoint-*")):
            return
        time.sleep(0.05)
    raise AssertionError("trial 1 never ran long enough to save a checkpoint")


@pytest.mark.parametrize(
    "mode",
    [
        pytest.param(
            [], id="trial-processes", marks=pytest.mark.slow
        ),  # worker start-up: tens of seconds on 2 cores
        pytest.param(["--in-process"], id="in-process"),
    ],
)
def test_rerun_after_sigkill_resumes_the_study(tmp_path: Path, mode: list[str]) -> None:
    path = write_study(
        tmp_path,
        study={
            "n_trials": 3,
            "pruner": {"type": "none"},
            "sampler": {"type": "random", "seed": 0},
            "enqueue": [
                {"learning_rate": 0.05, "delay": FAST},
                {"learning_rate": 0.02, "delay": SLOW},
                {"learning_rate": 0.01, "delay": FAST},
            ],
        },
        search_space={
            "learning_rate": {"type": "float", "low": 1e-3, "high": 0.1, "log": True},
            "delay": {"type": "categorical", "choices": [FAST, SLOW]},
        },
    )
    out = tmp_path / "out"
    storage = f"sqlite:///{out / 'study.db'}"
    first = _hpo_run(path, *mode)
    try:
        _wait_for_running_trial_with_checkpoint(first, storage, out)
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the whole process group: scheduler, workers, trial processes
        first.wait()
    before = _trials(storage)
    assert before[0].state == TrialState.COMPLETE and before[1].state == TrialState.RUNNING

    second = _hpo_run(path, *mode)
    output = second.communicate(timeout=240)[0].decode(errors="replace")
    assert second.returncode == 0, output

    trials = _trials(storage)
    states = [t.state for t in trials]
    # 0 kept; 1 failed as crashed and queued again; 2 the file's third enqueued trial; 3 is 1's retry.
    # Three count toward n_trials: nothing more ran.
    assert states == [TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE, TrialState.COMPLETE], output
    assert trials[0].datetime_complete == before[0].datetime_complete and trials[0].value == before[0].value
    crashed, retry = trials[1], trials[3]
    assert crashed.user_attrs["requeued"] is True and "crashed" in crashed.user_attrs["error"]
    assert retry.params == crashed.params
    assert retry.user_attrs["requeued_from_trial"] == 1
    assert retry.user_attrs["resumed_from_trial"] == 1
    resumed_at = int(Path(retry.user_attrs["resume_from"]).name.split("-")[1])
    assert resumed_at in (4, 8)
    # The retry continued from the checkpoint: it trained to step 12, and scored the evaluations before the crash too.
    assert retry.user_attrs["global_step"] == 12
    assert sorted(retry.user_attrs["final_metrics"]) and retry.user_attrs["best_step"] in (4, 8, 12)
    # The file's enqueued trials ran once each: a re-run does not enqueue them again.
    assert [t.params["learning_rate"] for t in trials] == [0.05, 0.02, 0.01, 0.02]
