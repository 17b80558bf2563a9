"""Trials sharing a GPU, end to end on a CPU machine: real worker processes, a real Optuna study, a real experiment
store, and a simulated GPU (`simulated_gpu`: NVML-shaped figures from what the trial processes say they hold).

- the pool, given the memory reader as a parameter: the first trial runs alone until measured, then two share the GPU;
- `hpo run` of a trial that raises a real torch.cuda.OutOfMemoryError when it finds another trial on its GPU: it is
  queued again, resumes from its checkpoint alone, is not counted as failed, and n_trials stays exact;
- `hpo run` of a trial that runs out of memory alone: it fails with one line, stored once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import simulated_gpu
from optuna.trial import TrialState
from scheduler_support import slow_study, study_url
from simulated_gpu import GiB

from hpo.scheduling.pool import run_trials
from hpo.spec import load_study_spec
from hpo.storage.database import create_storage
from hpo.storage.study_db import open_study
from hpo.tracking.store import open_store, trial_run_id
from hpo.trial.oom import FIX


def gpu_study(folder: Path, n_trials: int, callback: dict, **resources) -> Path:
    path = slow_study(
        folder,
        delay=0.1,
        study={"n_trials": n_trials},
        # use_cpu: the GPU is simulated; on a machine with a real GPU 0 the trials still train on the CPU.
        training={"max_steps": 20, "save_steps": 4, "eval_steps": 4, "logging_steps": 4, "use_cpu": True},
        resources={"trials_per_gpu": "auto", "threads_per_trial": 1, **resources},
        callbacks=[{"import": "simulated_gpu:OnSimulatedGpu", "args": callback}],
        tracking={"store": True},
    )
    simulated_gpu.copy_next_to(folder)
    return path


def load(folder: Path) -> list[optuna.trial.FrozenTrial]:
    study = optuna.load_study(study_name="test", storage=create_storage(study_url(folder)))
    return study.get_trials(deepcopy=False)


def hpo(folder: Path, *command: str, gib: float = 12) -> subprocess.CompletedProcess:
    """`hpo <command> study.yaml` on the simulated GPU, as a user would run it."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "400", **simulated_gpu.environment(folder, gib)}
    argv = [sys.executable, "-m", "hpo.cli", command[0], str(folder / "study.yaml"), *command[1:]]
    return subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=600)


def hpo_run(folder: Path) -> subprocess.CompletedProcess:
    return hpo(folder, "run", "--no-dry-run")


@pytest.mark.slow  # 10 s on 2 cores: run by .ci/run's slow suite
def test_the_pool_runs_the_first_trial_alone_then_packs_what_free_memory_allows(tmp_path, monkeypatch):
    path = gpu_study(tmp_path, 3, {"gib": 5})
    for name, value in simulated_gpu.environment(tmp_path).items():
        if name != "HPO_GPU_MEMORY_READER":  # the reader goes in as a parameter here
            monkeypatch.setenv(name, value)
    spec = load_study_spec(path)
    study = open_study(spec)
    run_trials(spec, study, n_trials=3, timeout=None, gpu_memory=simulated_gpu.read_gpu)
    trials = load(tmp_path)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    assert {t.user_attrs["slot"] for t in trials} <= {
        f"gpu 0 #{k}" for k in range(1, 9)
    }  # packed slots, told apart
    first, *later = sorted(trials, key=lambda t: t.user_attrs["gpu_admitted_at"])
    assert first.user_attrs["gpu_admission"].startswith(
        "start: no trial on this GPU (12.0 GiB free of 12.0 GiB)"
    )
    # Alone until measured: a later trial may be claimed meanwhile, but is admitted to the GPU only after it ended.
    first_end = first.datetime_start.timestamp() + first.user_attrs["duration_s"]
    assert all(t.user_attrs["gpu_admitted_at"] >= first_end for t in later)
    assert all(t.user_attrs["peak_gpu_memory"] == 4 * GiB for t in trials)  # + 1 GiB context = the 5 GiB held
    # 12 GiB - 5 GiB for the running trial - 0.6 GiB margin leaves room for one more of 5 GiB: two share the GPU.
    beside = [t.user_attrs["gpu_admission"] for t in later if "expects" in t.user_attrs["gpu_admission"]]
    assert beside and beside[0].startswith("start: expects 5.0 GiB, room 6.4 GiB")


@pytest.mark.slow  # 15-21 s: the default suite stays near 10 minutes on 2 cores
def test_a_trial_out_of_memory_beside_another_is_queued_again_resumes_alone_and_is_not_counted(tmp_path):
    gpu_study(tmp_path, 4, {"gib": 5, "oom_at_step": 5})
    done = hpo_run(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    trials = load(tmp_path)
    states = [t.state for t in trials]
    assert states.count(TrialState.COMPLETE) == 4 and states.count(TrialState.FAIL) == 1 and len(trials) == 5
    (oom,) = [t for t in trials if t.state == TrialState.FAIL]
    assert (
        oom.user_attrs["requeued"] and oom.user_attrs["cuda_oom"] and oom.user_attrs["oom_shared_with"] == 1
    )
    assert oom.user_attrs["error"] == (
        "CUDA out of memory: the trial asked for 2.00 GiB on GPU 0 (2.00 GiB free of 12.00 GiB; 4.00 GiB allocated "
        "by this trial's PyTorch; 5.00 GiB held by other processes), while sharing the GPU with 1 other trial(s): "
        "queued again"
    )
    assert "traceback" not in oom.user_attrs  # PyTorch's paragraph is not stored again
    (retry,) = [t for t in trials if t.user_attrs.get("requeued_from_trial") == oom.number]
    assert retry.state == TrialState.COMPLETE and retry.user_attrs["oom_retry"]
    assert retry.user_attrs["resume_from"].endswith(f"trial-{oom.number}/checkpoint-4")
    assert retry.user_attrs["gpu_admission"].startswith("start: no trial on this GPU")  # alone
    assert "1 failed" not in done.stdout + done.stderr and "1 fail" not in done.stdout + done.stderr
    assert (
        "this run finished 4 trials" in done.stdout and "the study has 4 complete, 1 requeued" in done.stdout
    )
    with open_store(tmp_path / "out" / "experiments.db") as store:
        events = store.events(trial_run_id("test", oom.number))
        assert [e["kind"] for e in events if e["kind"] in ("out_of_memory", "failed")] == ["out_of_memory"]
        assert store.run(trial_run_id("test", oom.number))["status"] == "requeued"
        assert not store.events(kind="failed")
        resumed = store.events(trial_run_id("test", retry.number), kind="resumed")
        assert resumed and resumed[0]["data"]["global_step"] == 4
    status = hpo(tmp_path, "status")
    assert "4 complete, 1 requeued" in status.stdout, status.stdout
    assert "peak gpu" in status.stdout and status.stdout.count("4.0 GiB") == 4  # the simulated peaks


def test_a_trial_out_of_memory_alone_fails_with_one_line_stored_once(tmp_path):
    gpu_study(tmp_path, 1, {"gib": 5, "oom_always_at": 3})
    done = hpo_run(tmp_path)
    output = done.stdout + done.stderr
    (trial,) = load(tmp_path)
    line = (
        "CUDA out of memory: the trial asked for 2.00 GiB on GPU 0 (7.00 GiB free of 12.00 GiB; 4.00 GiB allocated "
        f"by this trial's PyTorch); {FIX}"
    )
    assert trial.state == TrialState.FAIL and not trial.user_attrs.get("requeued")
    assert trial.user_attrs["error"] == line
    assert output.count("CUDA out of memory") == 1 and line in output, output
    assert "Tried to allocate" not in output
    with open_store(tmp_path / "out" / "experiments.db") as store:
        failed = store.events(trial_run_id("test", trial.number), kind="failed")
        assert [e["message"] for e in failed] == [line]
