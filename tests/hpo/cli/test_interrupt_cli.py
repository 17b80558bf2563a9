"""Ctrl-C of `hpo run`: a stop the user asked for is not an error. The command says what was saved (or that nothing
was) and how to continue, exits 130, leaves no process and no temporary folder behind, and the next run continues
without losing or repeating work."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from optuna.trial import TrialState
from scheduler_support import (
    ctrl_c_as_in_a_terminal,
    kill_quietly,
    running_trial_with_checkpoint,
    slow_study,
    trials,
    wait_for,
)


def _start(folder: Path, temp: Path, *args: str, command: str = "run") -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(temp)}
    given = ["--no-dry-run"] if command == "run" else []
    return subprocess.Popen(
        [sys.executable, "-m", "hpo.cli", command, str(folder / "study.yaml"), *given, *args],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        preexec_fn=ctrl_c_as_in_a_terminal,
    )


def _processes_in(folder: Path) -> list[psutil.Process]:
    """Processes still running in the study's folder (the command, its workers and their trials start there)."""
    found = []
    for process in psutil.process_iter():
        try:
            if Path(process.cwd()) == folder and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _interrupt(run: subprocess.Popen) -> str:
    run.send_signal(signal.SIGINT)
    try:
        output, _ = run.communicate(timeout=60)
    finally:
        kill_quietly(run)
    return output


@pytest.fixture
def temp(tmp_path: Path) -> Path:
    folder = tmp_path / "tmp"
    folder.mkdir()
    return folder


def _no_leftovers(folder: Path, temp: Path) -> None:
    # A killed grandchild is reaped by init a moment later; at a load of 4-5 (CI's lanes) one was still there after
    # 0.5 s (stop 67's fresh-clone run). A process left behind stays: 15 s tells the two apart.
    deadline = time.monotonic() + 15
    while _processes_in(folder) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert _processes_in(folder) == []
    assert sorted(p.name for p in temp.iterdir()) == []


@pytest.mark.parametrize(("command", "given"), [("run", " --no-dry-run"), ("worker", "")])
def test_ctrl_c_before_any_trial_saved_says_nothing_was_saved(tmp_path, temp, command, given):
    folder = tmp_path / "study"
    slow_study(folder, study={"n_trials": 1})
    run = _start(folder, temp, command=command)
    try:  # the workers are starting (importing torch takes seconds): no trial has begun
        wait_for(lambda: (folder / "out" / ".hpo" / "logs" / "worker-0.log").exists(), what="the worker")
    except AssertionError:
        kill_quietly(run)
        raise
    output = _interrupt(run)
    assert run.returncode == 130, output
    assert "error" not in output.lower() and "queued again" not in output and "Traceback" not in output
    assert "nothing was saved" in output, output
    assert f"continue with: hpo {command} {folder / 'study.yaml'}{given}\n" in output, output
    _no_leftovers(folder, temp)


@pytest.mark.slow
def test_ctrl_c_of_a_running_trial_names_its_checkpoint_and_the_rerun_resumes_it(tmp_path, temp):
    folder = tmp_path / "study"
    slow_study(folder, study={"n_trials": 1})
    run = _start(folder, temp)
    try:
        wait_for(lambda: running_trial_with_checkpoint(folder, 0, 4), what="trial 0 at checkpoint-4")
    except AssertionError:
        kill_quietly(run)
        raise
    output = _interrupt(run)
    assert run.returncode == 130, output
    assert "error" not in output.lower() and "Traceback" not in output
    saved = [t for t in trials(folder) if t.number == 0][0].user_attrs["interrupted_step"]
    checkpoint = folder / "out" / "trial-0" / f"checkpoint-{saved}"
    assert checkpoint.is_dir()
    assert f"trial 0 saved {checkpoint} (step {saved})" in output, output
    _no_leftovers(folder, temp)

    rerun = _start(folder, temp, "--set", "model.delay=0.0")
    output, _ = rerun.communicate(timeout=180)
    assert rerun.returncode == 0, output
    retry = max(trials(folder), key=lambda t: t.number)
    assert retry.state == TrialState.COMPLETE and retry.user_attrs["resumed_from_trial"] == 0
    assert retry.user_attrs["resume_from"] == str(checkpoint)  # from the saved step, not from the start
    _no_leftovers(folder, temp)
