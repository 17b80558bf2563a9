"""A worker process that dies (SIGKILL, out of memory) is restarted, at start-up as later, up to a limit per slot;
`hpo run` says so as it happens, and the trial the worker was running is queued again and finished."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest
from optuna.trial import TrialState
from scheduler_support import kill_quietly, slow_study, start_hpo, trials, wait_for

from hpo.scheduling.pool import MAX_RESTARTS

ASHA = {"type": "asha", "min_resource": 4, "max_resource": 16, "reduction_factor": 2}


def worker_pids(run) -> list[int]:
    """The worker processes `hpo run` has started (psutil: its children running hpo.scheduling.worker)."""
    try:
        children = psutil.Process(run.pid).children()
    except psutil.NoSuchProcess:
        return []
    pids = []
    for child in children:
        try:
            if "hpo.scheduling.worker" in child.cmdline():
                pids.append(child.pid)
        except psutil.NoSuchProcess:
            pass
    return pids


def assert_every_trial_accounted_for(folder: Path, n_trials: int) -> None:
    """n_trials exact (a trial failed and queued again counts once: its retry), none left running or waiting."""
    final = trials(folder)
    assert [t.number for t in final if not t.state.is_finished()] == []
    assert len([t for t in final if not t.user_attrs.get("requeued")]) == n_trials


@pytest.mark.slow  # 12 s on 2 cores: run by .ci/run's slow suite
def test_a_worker_killed_while_starting_is_restarted_and_the_study_completes(tmp_path):
    slow_study(
        tmp_path,
        study={"n_trials": 6, "scheduler": ASHA, "sampler": {"type": "random", "seed": 1}},
        training={"max_steps": 16},
        resources={"workers": 2},
    )
    run = start_hpo(tmp_path, "run")
    try:
        # The workers start first, while `hpo run` itself still imports torch: this kill lands before the worker
        # has read its configuration.
        victim = wait_for(lambda: worker_pids(run)[:1], timeout=30, what="a worker process")[0]
        os.kill(victim, signal.SIGKILL)
        output, _ = run.communicate(timeout=240)
    finally:
        kill_quietly(run)
    assert run.returncode == 0, output
    assert f"was killed by SIGKILL; restarting it (1 of {MAX_RESTARTS})" in output, output
    assert_every_trial_accounted_for(tmp_path, 6)


@pytest.mark.slow
def test_a_worker_killed_mid_trial_is_restarted_its_trial_resumes_and_its_slot_runs_trials_again(tmp_path):
    slow_study(tmp_path, study={"n_trials": 6}, resources={"workers": 2})
    run = start_hpo(tmp_path, "run")
    try:
        victim = wait_for(
            lambda: running_with_checkpoint(tmp_path, run), timeout=120, what="a trial at checkpoint-8"
        )
        worker_pid = int(victim.user_attrs["worker"].rsplit(":", 1)[1])
        killed_at = time.time()
        os.kill(worker_pid, signal.SIGKILL)
        output, _ = run.communicate(timeout=300)
    finally:
        kill_quietly(run)
    assert run.returncode == 0, output
    slot = victim.user_attrs["slot"]
    assert f"worker for {slot} was killed by SIGKILL; restarting it (1 of {MAX_RESTARTS})" in output, output
    assert_every_trial_accounted_for(tmp_path, 6)
    final = {t.number: t for t in trials(tmp_path)}
    crashed = final[victim.number]
    assert crashed.state == TrialState.FAIL and crashed.user_attrs["requeued"]
    (retry,) = [t for t in final.values() if t.user_attrs.get("requeued_from_trial") == victim.number]
    assert retry.state == TrialState.COMPLETE
    assert (
        int(retry.user_attrs["resume_from"].rsplit("-", 1)[1]) >= 8
    )  # not lost: resumed from its checkpoint
    after = [
        t
        for t in final.values()
        if t.user_attrs.get("slot") == slot and t.datetime_start.timestamp() > killed_at
    ]
    assert after and all(t.user_attrs["worker"] != victim.user_attrs["worker"] for t in after), output


def running_with_checkpoint(folder: Path, run):
    """A RUNNING trial of one of `run`'s workers, once it has written checkpoint-8."""
    workers = worker_pids(run)
    for trial in trials(folder):
        owner = str(trial.user_attrs.get("worker", ""))
        if trial.state == TrialState.RUNNING and owner and int(owner.rsplit(":", 1)[1]) in workers:
            if (folder / "out" / f"trial-{trial.number}" / "checkpoint-8").is_dir():
                return trial
    return None


def test_workers_that_keep_dying_are_restarted_up_to_the_limit_then_the_run_stops_with_one_line(tmp_path):
    # Every worker process kills itself as it starts (a sitecustomize module, run by each new Python process).
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(
        "import os, signal, sys\n"
        "if sys.orig_argv[-1:] == ['hpo.scheduling.worker']:\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    slow_study(tmp_path, study={"n_trials": 2}, resources={"workers": 2})
    path = os.pathsep.join([str(hooks), os.environ.get("PYTHONPATH", "")])
    run = start_hpo(tmp_path, "run", env={"PYTHONPATH": path})
    try:
        output, _ = run.communicate(timeout=120)
    finally:
        kill_quietly(run)
    assert run.returncode == 1, output
    for slot in ("cpu 0", "cpu 1"):
        for restart in range(1, MAX_RESTARTS + 1):
            assert (
                f"worker for {slot} was killed by SIGKILL; restarting it ({restart} of {MAX_RESTARTS})"
                in output
            )
        assert (
            f"worker for {slot} was killed by SIGKILL; not restarted: it was restarted {MAX_RESTARTS} times"
            in output
        )
    last = output.strip().splitlines()[-1]
    assert last.startswith(f"error: every worker died and was restarted {MAX_RESTARTS} times"), output
    assert "Traceback" not in output
