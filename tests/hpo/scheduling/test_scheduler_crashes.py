"""Slower crash paths: a SIGKILLed worker (its trial found stale by heartbeat), and a second Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from optuna.trial import TrialState
from scheduler_support import (
    MAX_STEPS,
    alive,
    kill_quietly,
    running_trial_with_checkpoint,
    slow_study,
    start_hpo,
    trials,
    wait_for,
)

from hpo.tracking.store import open_store

pytestmark = pytest.mark.slow


def test_a_killed_worker_is_replaced_and_its_stale_trial_resumes(tmp_path):
    slow_study(tmp_path, tracking={"store": True})  # heartbeat every 1 s, stale after 3 s; events recorded
    run = start_hpo(tmp_path, "run", "--n-trials", "1")
    try:
        victim = wait_for(
            lambda: running_trial_with_checkpoint(tmp_path, 0, 8), what="trial 0 at checkpoint-8"
        )
        worker_pid = int(victim.user_attrs["worker"].rsplit(":", 1)[1])
        os.kill(worker_pid, signal.SIGKILL)
        wait_for(
            lambda: not alive(victim.user_attrs["pid"]), timeout=10, what="the trial to die with its worker"
        )
        output, _ = run.communicate(timeout=240)
    finally:
        kill_quietly(run)
    assert run.returncode == 0, output
    crashed, retry = sorted(trials(tmp_path), key=lambda t: t.number)
    assert crashed.state == TrialState.FAIL
    # `hpo run` saw its worker die: the trial is queued again at once, not after the heartbeat's grace period.
    assert (
        crashed.user_attrs["error"]
        == f"crashed: its process {victim.user_attrs['worker']} ended while the trial was running"
    )
    assert retry.state == TrialState.COMPLETE
    assert retry.user_attrs["resumed_from_trial"] == 0
    assert int(retry.user_attrs["resume_from"].rsplit("-", 1)[1]) >= 8
    assert retry.user_attrs["global_step"] == MAX_STEPS
    assert retry.user_attrs["worker"] != victim.user_attrs["worker"]  # a new worker process took the slot
    store = open_store(tmp_path / "out" / "experiments.db")
    (resumed,) = store.events(f"test/trial-{retry.number}", kind="resumed")  # one event per resume, not two
    assert resumed["message"] == f"resumed at step {int(retry.user_attrs['resume_from'].rsplit('-', 1)[1])}"


def lines_until(run: subprocess.Popen, prefix: str) -> str:
    """What the command printed up to and including its first line starting with `prefix` (all of it if it ended)."""
    assert run.stdout is not None
    read = []
    while line := run.stdout.readline():
        read.append(line)
        if line.startswith(prefix):
            break
    return "".join(read)


def test_a_second_ctrl_c_stops_everything_at_once(tmp_path):
    # One slow step a second: the graceful stop the first Ctrl-C starts ends with the step, so a second Ctrl-C sent as
    # soon as the first is acknowledged comes while it still runs (with 0.3 s steps it raced the step's end).
    slow_study(tmp_path, delay=1.0, training={"save_steps": 1})
    run = start_hpo(tmp_path, "run", "--n-trials", "1")
    try:
        victim = wait_for(
            lambda: running_trial_with_checkpoint(tmp_path, 0, 2), what="trial 0 at checkpoint-2"
        )
        worker_pid = int(victim.user_attrs["worker"].rsplit(":", 1)[1])
        run.send_signal(signal.SIGINT)
        before = lines_until(run, "stopping:")  # the first Ctrl-C handled: a second is not merged into it
        started = time.monotonic()
        run.send_signal(signal.SIGINT)
        output, _ = run.communicate(timeout=30)
        output = before + output
        stopped_in = time.monotonic() - started
    finally:
        kill_quietly(run)
    assert run.returncode == 130, output
    assert stopped_in < 5, f"took {stopped_in:.1f} s"
    assert "stopped at once: trial 0 saved " in output and "continue with: hpo run" in output
    wait_for(
        lambda: not alive(worker_pid) and not alive(victim.user_attrs["pid"]),
        timeout=5,
        what="no process left",
    )
    # Killed mid-step, the trial is left RUNNING; the next run finds its process gone and resumes it.
    rerun = start_hpo(tmp_path, "run", "--n-trials", "1", "--set", "model.delay=0.0")
    output, _ = rerun.communicate(timeout=240)
    assert rerun.returncode == 0, output
    first, retry = sorted(trials(tmp_path), key=lambda t: t.number)
    assert first.state == TrialState.FAIL and first.user_attrs["requeued"] is True
    assert retry.state == TrialState.COMPLETE and retry.user_attrs["resumed_from_trial"] == 0
