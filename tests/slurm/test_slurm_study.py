"""`hpo run --launcher slurm`: a study's workers as a real SLURM job array on the loopback cluster, sharing a real
PostgreSQL study; scancel and SLURM's time-limit warning (USR1) mid-trial; the refusals before any job exists."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import pytest
from cli_support import run_hpo, stored_trials
from optuna.trial import TrialState
from scheduler_support import MAX_STEPS, slow_study, wait_for
from study_task import write_study

from hpo.integrations.slurm import ACTIVE_STATES, recorded_jobs, task_states

pytestmark = pytest.mark.slurm


def _job(folder: Path) -> tuple[str, int]:
    [job] = recorded_jobs(str(folder / "out"))
    return job["job_id"], job["tasks"]


def _wait_until_ended(job_id: str, tasks: int, timeout: float = 240) -> dict[int, str]:
    def ended() -> dict[int, str] | None:
        states = task_states(job_id, tasks)
        return None if any(state in ACTIVE_STATES for state in states.values()) else states

    return wait_for(ended, timeout=timeout, what=f"SLURM job {job_id} to end")


def _newest_job_id() -> int:
    """The newest job id SLURM has given (scontrol's next id, less one): unchanged when nothing was submitted. (A
    count of squeue's lines is not: ended jobs leave its list as they age, MinJobAge.)"""
    shown = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    [line] = [line for line in shown.splitlines() if line.split("=")[0].strip() == "NEXT_JOB_ID"]
    return int(line.split("=", 1)[1]) - 1


def test_a_two_task_array_runs_the_study_to_exactly_n_trials(tmp_path, postgres_url, slurm_cluster):
    name = f"slurm-{uuid.uuid4().hex[:8]}"
    write_study(tmp_path, study={"name": name, "n_trials": 6, "pruner": {"type": "none"}})
    started = time.monotonic()
    done = run_hpo(
        tmp_path, "run", "study.yaml", "--launcher", "slurm", "--workers", "2", "--storage", postgres_url
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    assert "submitted SLURM job" in done.stdout and "hpo status study.yaml" in done.stdout
    trials = stored_trials(postgres_url, name)
    assert sorted(t.number for t in trials) == list(range(6))
    assert all(t.state == TrialState.COMPLETE for t in trials), [(t.number, t.state.name) for t in trials]
    job_id, tasks = _job(tmp_path)
    assert tasks == 2
    logs = tmp_path / "out" / ".hpo" / "slurm"
    assert (logs / f"{job_id}_0.out").is_file() and (logs / f"{job_id}_1.out").is_file()
    assert "this run finished 6 trials" in done.stdout
    print(f"2-task array, 6 trials: {elapsed:.1f} s from the command to its summary")
    status = run_hpo(tmp_path, "status", "study.yaml", "--storage", postgres_url)
    assert status.returncode == 0, status.stderr
    assert "SLURM jobs" in status.stdout and job_id in status.stdout


def test_scancel_of_one_task_mid_trial_the_other_resumes_it_and_n_trials_holds(
    tmp_path, postgres_url, slurm_cluster
):
    name = f"slurm-{uuid.uuid4().hex[:8]}"
    # Trials of 8 s or more, 4 of them: on a loaded machine one task's worker may start 10-20 s after the other's,
    # and both must be seen training at once.
    slow_study(tmp_path, delay=0.2, study={"name": name, "n_trials": 4, "pruner": {"type": "none"}})
    submitted = run_hpo(
        tmp_path,
        "run",
        "study.yaml",
        "--launcher",
        "slurm",
        "--workers",
        "2",
        "--storage",
        postgres_url,
        "--detach",
        "--no-dry-run",
    )
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    job_id, tasks = _job(tmp_path)

    def two_running_with_checkpoints() -> bool:
        running = [t for t in stored_trials(postgres_url, name) if t.state == TrialState.RUNNING]
        return len(running) == 2 and all(
            (tmp_path / "out" / f"trial-{t.number}" / "checkpoint-4").is_dir() for t in running
        )

    wait_for(two_running_with_checkpoints, timeout=240, what="both tasks mid-trial, past a checkpoint")
    subprocess.run(["scancel", f"{job_id}_0"], check=True)  # SIGTERM to every process of task 0
    states = _wait_until_ended(job_id, tasks)
    assert states[0] == "CANCELLED" and states[1] == "COMPLETED", states
    trials = stored_trials(postgres_url, name)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    requeued = [t for t in trials if t.state == TrialState.FAIL and t.user_attrs.get("requeued")]
    assert len(complete) == 4, [(t.number, t.state.name, t.user_attrs.get("error")) for t in trials]
    assert len(requeued) == 1 and requeued[0].user_attrs.get("interrupted"), [t.user_attrs for t in requeued]
    stopped = requeued[0]
    [retry] = [t for t in complete if t.user_attrs.get("resumed_from_trial") == stopped.number]
    step = int(retry.user_attrs["resume_from"].rsplit("-", 1)[1])
    assert step == stopped.user_attrs["interrupted_step"] >= 4
    assert retry.user_attrs["global_step"] == MAX_STEPS
    assert len(trials) == 5  # 4 trials and the one stopped attempt: n_trials exact
    print(
        f"scancel of task 0: trial {stopped.number} saved at step {step}; 1 retry (trial {retry.number}) finished"
    )


def test_the_time_limit_warning_saves_the_trial_and_a_new_array_resumes_it(
    tmp_path, postgres_url, slurm_cluster
):
    """SLURM's `--signal=B:USR1@grace` before the time limit, sent now with scancel: the worker saves and stops."""
    name = f"slurm-{uuid.uuid4().hex[:8]}"
    slow_study(tmp_path, delay=0.1, study={"name": name, "n_trials": 1, "pruner": {"type": "none"}})
    arguments = ["run", "study.yaml", "--launcher", "slurm", "--storage", postgres_url, "--no-dry-run"]
    submitted = run_hpo(tmp_path, *arguments, "--detach")
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    job_id, tasks = _job(tmp_path)
    wait_for(lambda: (tmp_path / "out" / "trial-0" / "checkpoint-4").is_dir(), what="trial 0 at checkpoint-4")
    subprocess.run(["scancel", "--batch", "--signal=USR1", f"{job_id}_0"], check=True)
    _wait_until_ended(job_id, tasks)
    stopped, queued = stored_trials(
        postgres_url, name
    )  # the stopped attempt, and its retry waiting in the queue
    assert stopped.state == TrialState.FAIL and stopped.user_attrs.get("interrupted"), stopped.user_attrs
    assert stopped.user_attrs.get("requeued") and queued.state == TrialState.WAITING
    again = run_hpo(tmp_path, *arguments)
    assert again.returncode == 0, again.stdout + again.stderr
    retry = stored_trials(postgres_url, name)[-1]
    assert retry.state == TrialState.COMPLETE and retry.user_attrs["resumed_from_trial"] == 0
    assert retry.user_attrs["resume_from"].endswith(f"checkpoint-{stopped.user_attrs['interrupted_step']}")


def _refused(done: subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert all(word in lines[0] for word in words), lines[0]


def test_refusals_exit_2_with_one_line_before_any_job_exists(tmp_path, postgres_url, slurm_cluster):
    write_study(tmp_path, study={"name": f"slurm-{uuid.uuid4().hex[:8]}", "n_trials": 2})
    before = _newest_job_id()
    sqlite = run_hpo(tmp_path, "run", "study.yaml", "--launcher", "slurm", "--workers", "2")
    _refused(
        sqlite, "study.storage: a SLURM study needs a database every node reaches (PostgreSQL)", "SQLite"
    )
    no_sbatch = run_hpo(
        tmp_path,
        "run",
        "study.yaml",
        "--launcher",
        "slurm",
        "--storage",
        postgres_url,
        env={"PATH": "/nonexistent"},
    )
    _refused(no_sbatch, "sbatch is not on PATH")
    bad_key = run_hpo(
        tmp_path,
        "run",
        "study.yaml",
        "--launcher",
        "slurm",
        "--storage",
        postgres_url,
        "--set",
        "launcher.partiton=debug",
    )
    _refused(bad_key, "launcher.partiton")
    bad_option = run_hpo(
        tmp_path,
        "run",
        "study.yaml",
        "--storage",
        postgres_url,
        "--set",
        "launcher.type=slurm",
        "--set",
        "launcher.sbatch_options=[--array=0-9]",
    )
    _refused(bad_option, "launcher.sbatch_options", "--workers")
    assert _newest_job_id() == before  # no job was submitted
    assert not (tmp_path / "out" / ".hpo" / "slurm").exists()
