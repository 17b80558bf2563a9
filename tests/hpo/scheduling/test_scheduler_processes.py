"""The scheduler with real processes: parallel workers, one process per trial, crashes and interrupts.

Each test runs real worker processes on the real SQLite storage; the crash and interrupt tests start `hpo run` as a user
would and send real signals."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from optuna.trial import TrialState
from scheduler_support import (
    MAX_STEPS,
    alive,
    checkpoint_steps,
    kill_quietly,
    running_trial_with_checkpoint,
    slow_study,
    start_hpo,
    trials,
    wait_for,
)

from hpo.spec import load_study_spec
from hpo.study.manager import run_loaded_study, run_study


def _overlap(a, b) -> bool:
    return a.datetime_start < b.datetime_complete and b.datetime_start < a.datetime_complete


def test_two_workers_overlap_on_disjoint_slots_and_never_exceed_n_trials(tmp_path):
    path = slow_study(tmp_path, delay=0.02, training={"max_steps": 16})
    summary = run_study(path, n_trials=5, workers=2, training__save_strategy="no")
    done = trials(tmp_path)
    assert summary.counts == {"COMPLETE": 5}
    assert sorted(t.number for t in done) == [0, 1, 2, 3, 4]  # exactly n_trials, no extra trial asked
    by_slot = {slot: [t for t in done if t.user_attrs["slot"] == slot] for slot in ("cpu 0", "cpu 1")}
    assert all(by_slot.values()), f"both slots ran trials: { {s: len(t) for s, t in by_slot.items()} }"
    for slot_trials in by_slot.values():  # a slot runs one trial at a time
        ordered = sorted(slot_trials, key=lambda t: t.datetime_start)
        assert all(
            a.datetime_complete <= b.datetime_start for a, b in zip(ordered, ordered[1:], strict=False)
        )
    assert any(_overlap(a, b) for a in by_slot["cpu 0"] for b in by_slot["cpu 1"]), (
        "the slots ran in parallel"
    )
    # Trials run in trial processes, one per worker (it takes the worker's next trial: test_warm_trial_process.py),
    # never in a worker or in this process.
    pids = {t.user_attrs["pid"] for t in done}
    workers = {int(t.user_attrs["worker"].rsplit(":", 1)[1]) for t in done}
    assert len(pids) == 2 and not pids & {os.getpid(), *workers}
    assert all(t.user_attrs["startup_s"] < 10 for t in done)

    again = run_study(path, n_trials=5, workers=2, training__save_strategy="no")
    assert again.counts == {"COMPLETE": 5}  # the study already has its 5 trials: nothing new starts


def test_a_data_function_without_parameters_is_loaded_once_per_worker_not_per_trial(tmp_path, monkeypatch):
    monkeypatch.setenv("DATA_LOADS_FILE", str(tmp_path / "data-loads.txt"))
    path = slow_study(tmp_path, delay=0.0, training={"max_steps": 8}, task={"data": "study_task:shared_data"})
    summary = run_study(path, n_trials=6, workers=2, training__save_strategy="no")
    assert sum(summary.counts.values()) == 6 and "FAIL" not in summary.counts
    loaders = (tmp_path / "data-loads.txt").read_text().split()
    trial_pids = {str(t.user_attrs["pid"]) for t in trials(tmp_path)}
    workers = {t.user_attrs["worker"].rsplit(":", 1)[1] for t in trials(tmp_path)}
    # The dry run (this process) and each worker once, before forking; no trial process loaded it again. A worker
    # that claimed no trial (the other took all 6 first) loaded it too, but no trial names its pid.
    assert len(loaders) == len(set(loaders)) <= 3, loaders
    assert {str(os.getpid()), *workers} <= set(loaders), loaders
    assert not trial_pids & set(loaders)


# A pruner makes every evaluation a report (checked below: a resumed trial reports only later steps); with one trial
# it never prunes.
REPORTS = {"study": {"pruner": {"type": "median"}}}


@pytest.mark.slow  # 10 s on 2 cores: run by .ci/run's slow suite
def test_a_killed_trial_is_retried_and_continues_from_its_checkpoint(tmp_path):
    slow_study(tmp_path, **REPORTS)
    run = start_hpo(tmp_path, "run", "--n-trials", "1")
    try:
        victim = wait_for(
            lambda: running_trial_with_checkpoint(tmp_path, 0, 8), what="trial 0 at checkpoint-8"
        )
        os.kill(victim.user_attrs["pid"], signal.SIGKILL)
        output, _ = run.communicate(timeout=180)
    finally:
        kill_quietly(run)
    assert run.returncode == 0, output
    first, retry = sorted(trials(tmp_path), key=lambda t: t.number)
    assert first.state == TrialState.FAIL
    assert first.user_attrs["error"] == "crashed: trial process killed by SIGKILL"
    assert first.user_attrs["requeued"] is True and first.user_attrs["crashed"] is True
    assert retry.state == TrialState.COMPLETE
    assert retry.params == first.params
    assert retry.user_attrs["resumed_from_trial"] == 0
    resumed_step = int(retry.user_attrs["resume_from"].rsplit("-", 1)[1])
    assert resumed_step >= 8
    assert retry.user_attrs["global_step"] == MAX_STEPS
    # The retry continued from that step: it saved only later checkpoints and logged only later steps.
    retry_dir = tmp_path / "out" / "trial-1"
    # After the study keep_checkpoints leaves the best one, which can be the checkpoint it resumed from (trial 0's
    # folder) when accuracy peaked before the kill: then the retry's own folder holds none.
    kept = checkpoint_steps(retry_dir)
    assert all(saved > resumed_step for saved in kept)
    assert min(retry.intermediate_values) > resumed_step
    if kept:
        state = json.loads((retry_dir / f"checkpoint-{kept[-1]}" / "trainer_state.json").read_text())
        new_steps = [entry["step"] for entry in state["log_history"] if entry["step"] > resumed_step]
        assert new_steps and min(new_steps) > resumed_step


def test_ctrl_c_checkpoints_requeues_and_the_next_run_resumes(tmp_path):
    slow_study(tmp_path, **REPORTS)
    run = start_hpo(tmp_path, "run", "--n-trials", "1")
    try:
        victim = wait_for(
            lambda: running_trial_with_checkpoint(tmp_path, 0, 8), what="trial 0 at checkpoint-8"
        )
        worker_pid = int(victim.user_attrs["worker"].rsplit(":", 1)[1])
        started = time.monotonic()
        run.send_signal(signal.SIGINT)
        output, _ = run.communicate(timeout=60)
        stopped_in = time.monotonic() - started
    finally:
        kill_quietly(run)
    assert run.returncode == 130, output
    # A stop the user asked for: what was saved and how to continue, not an error.
    assert "stopped: trial 0 saved " in output and "the next run resumes from there" in output
    assert "continue with: hpo run " in output and "--n-trials 1" in output and "error:" not in output
    assert stopped_in < 15, f"took {stopped_in:.1f} s to stop"
    assert not alive(worker_pid) and not alive(victim.user_attrs["pid"])  # no process left behind
    first, queued = sorted(trials(tmp_path), key=lambda t: t.number)
    assert first.state == TrialState.FAIL and first.user_attrs["interrupted"] is True
    step = first.user_attrs["interrupted_step"]
    assert 8 <= step < MAX_STEPS
    assert queued.state == TrialState.WAITING
    assert queued.user_attrs["resume_from"].endswith(f"trial-0/checkpoint-{step}")  # saved at the interrupt

    rerun = start_hpo(tmp_path, "run", "--n-trials", "1")
    output, _ = rerun.communicate(timeout=180)
    assert rerun.returncode == 0, output
    resumed = sorted(trials(tmp_path), key=lambda t: t.number)[1]
    assert resumed.state == TrialState.COMPLETE
    assert resumed.user_attrs["resumed_from_trial"] == 0
    assert resumed.user_attrs["global_step"] == MAX_STEPS
    # It went on from the interrupt: it reported, and saved, only later steps. Its folder may hold none of them once
    # keep_checkpoints has kept only its best, which can be the checkpoint it resumed from, in trial 0's folder (on a
    # loaded machine the interrupt lands late, after accuracy peaked).
    assert min(resumed.intermediate_values) > step
    assert all(saved > step for saved in checkpoint_steps(tmp_path / "out" / "trial-1"))
    assert len(trials(tmp_path)) == 2  # n_trials=1: the interrupted trial and its continuation, nothing more


def test_an_exception_is_not_retried_unless_configured_and_retries_are_bounded(tmp_path):
    plain = slow_study(tmp_path / "plain", delay=0.0, model={"explode": True})
    summary = run_loaded_study(load_study_spec(plain), n_trials=1, workers=1, dry_run=False)
    assert summary.counts == {"FAIL": 1}
    (failed,) = trials(tmp_path / "plain")
    assert failed.user_attrs["error"] == "RuntimeError: model_init exploded on purpose"
    assert not failed.user_attrs.get("requeued")

    retried = slow_study(
        tmp_path / "retried",
        delay=0.0,
        model={"explode": True},
        resources={"retry_on_exception": True, "max_retries": 1},
    )
    summary = run_loaded_study(load_study_spec(retried), n_trials=1, workers=1, dry_run=False)
    first, retry = sorted(trials(tmp_path / "retried"), key=lambda t: t.number)
    assert first.user_attrs["requeued"] is True and first.user_attrs["error"].startswith(
        "failed: RuntimeError"
    )
    assert retry.params == first.params and retry.user_attrs["requeued_from_trial"] == 0
    assert retry.state == TrialState.FAIL and retry.user_attrs["requeued"] is False
    assert "not retried: resources.max_retries = 1 used" in retry.user_attrs["error"]
    assert summary.counts == {"FAIL": 1, "REQUEUED": 1}
    status = json.loads((tmp_path / "retried" / "out" / ".hpo" / "slots" / "slot-0.json").read_text())
    assert status["state"] == "stopped"  # the live table's record of the worker
