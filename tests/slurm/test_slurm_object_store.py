"""A study on machines that share no folder: a real SLURM job array on the loopback cluster whose tasks each work in a
scratch folder of their own, coordinated by a real PostgreSQL study, with every checkpoint in a real S3 API (moto's
server, `.ci/s3.sh`). Promotions (ASHA), exploits (PBT) and retries cross tasks through the object store; one task is
cancelled mid-trial by scancel; the export is made from the store on a third, empty folder and reloads. The figures
(trials, retries, bytes up and down per trial, fetch time per resume) are printed: `pytest -m s3 -s` shows them."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import optuna
import pytest
import s3fs
import safetensors.torch
import torch
from cli_support import PBT, run_hpo, stored_trials
from optuna.trial import FrozenTrial, TrialState
from scheduler_support import slow_study, wait_for
from study_task import write_study

import hpo
from hpo.integrations.slurm import ACTIVE_STATES, recorded_jobs, task_states
from hpo.scheduling.pbt import DECIDED
from hpo.scheduling.pbt_in_place import exploited_at
from hpo.spec.output_url import mirror_name
from hpo.storage import pause
from hpo.storage.database import create_storage
from hpo.storage.lineage import latest_by_member, member_of, members, segments


def _hpo(folder: Path, *args: str, env: dict[str, str] | None = None):
    # Uploads to the object store on a loaded node take longer than run_hpo's default allows.
    return run_hpo(folder, *args, env=env, timeout=400)


pytestmark = [pytest.mark.slurm, pytest.mark.s3]
ASHA = {"type": "asha", "min_resource": 8, "max_resource": 32, "reduction_factor": 2}


def _submit(folder: Path, postgres_url: str, *extra: str) -> tuple[str, int]:
    """`hpo run --launcher slurm --workers 2 --detach` from `folder`, with scratch folders under folder/scratch."""
    done = _hpo(
        folder,
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
        *extra,
        env={"HPO_SCRATCH": str(folder / "scratch")},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [mirror] = (folder / "scratch").glob("hpo-mirror-*")  # the submitting machine's: logs and the job record
    [job] = recorded_jobs(str(mirror))
    return job["job_id"], job["tasks"]


def _wait_until_ended(job_id: str, tasks: int, timeout: float = 400) -> dict[int, str]:
    def ended() -> dict[int, str] | None:
        states = task_states(job_id, tasks)
        return None if any(state in ACTIVE_STATES for state in states.values()) else states

    return wait_for(ended, timeout=timeout, what=f"SLURM job {job_id} to end")


def _task_mirrors(folder: Path, job_id: str, url: str) -> dict[int, Path]:
    """Each task's own scratch mirror (the job script gives task T the folder hpo-task-<job>_T)."""
    return {
        task: folder / "scratch" / f"hpo-task-{job_id}_{task}" / mirror_name(url)
        for task in (0, 1)
        if (folder / "scratch" / f"hpo-task-{job_id}_{task}").is_dir()
    }


def _task_of(trial: FrozenTrial) -> int | None:
    """The array task whose worker runs a RUNNING trial, from the worker's environment (one node: readable here)."""
    worker = str(trial.user_attrs.get("worker") or "")
    pid = worker.rpartition(":")[2]
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    for entry in environ:
        if entry.startswith(b"SLURM_ARRAY_TASK_ID="):
            return int(entry.split(b"=", 1)[1])
    return None


def _figures(label: str, trials: list[FrozenTrial]) -> dict[str, float]:
    """Print and return the object store's figures for a study."""
    finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    retries = [t for t in trials if t.user_attrs.get("requeued_from_trial") is not None]
    up = [int((t.user_attrs.get("uploaded") or {}).get("bytes", 0)) for t in trials]
    fetches = [f for t in trials for f in t.user_attrs.get("fetched") or []]
    down = [sum(int(f["bytes"]) for f in t.user_attrs.get("fetched") or []) for t in trials]
    moved = [f for f in fetches if f["bytes"] > 0]
    seconds = sorted(float(f["seconds"]) for f in moved)
    figures = {
        "trials": len(finished),
        "retries": len(retries),
        "up_per_trial": sum(up) / max(1, len(trials)),
        "down_per_trial": sum(down) / max(1, len(trials)),
        "resumes": len(fetches),
        "fetched_from_store": len(moved),
        "fetch_s_median": seconds[len(seconds) // 2] if seconds else 0.0,
        "fetch_s_max": seconds[-1] if seconds else 0.0,
    }
    print(
        f"{label}: {figures['trials']} trials finished, {figures['retries']} retries; per attempt "
        f"{figures['up_per_trial']:.0f} bytes uploaded, {figures['down_per_trial']:.0f} bytes downloaded; "
        f"{figures['resumes']} resumes, {figures['fetched_from_store']} fetched from the store "
        f"(median {figures['fetch_s_median'] * 1000:.0f} ms, max {figures['fetch_s_max'] * 1000:.0f} ms each)"
    )
    return figures


def _export_from_store(folder: Path, postgres_url: str, bucket: str, name: str) -> tuple[Path, str]:
    """`hpo export` on a machine that has nothing of the study (an empty scratch folder), to the store; then the
    export downloaded into a fresh folder (as its user would) and the output of the command."""
    done = _hpo(
        folder,
        "export",
        "study.yaml",
        "--storage",
        postgres_url,
        "--out",
        f"s3://{bucket}/exports/{name}",
        env={"HPO_SCRATCH": str(folder / "exporter")},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "uploaded the export to s3://" in done.stdout
    target = folder / "downloaded"
    s3fs.S3FileSystem(skip_instance_cache=True).get(f"{bucket}/exports/{name}/", str(target), recursive=True)
    assert (target / "export.json").is_file() and (target / "model.safetensors").is_file()
    return target, done.stdout


def _reload_difference(export: Path, out: str) -> float:
    """The export reloads (hpo.load_exported) and its own reload check found no difference."""
    model = hpo.load_exported(export)
    assert isinstance(model, torch.nn.Module)
    [row] = [line for line in out.splitlines() if "eval_accuracy" in line]
    return float(row.replace("│", " ").split()[-1])


def _held_by(mirrors: dict[int, Path], checkpoint: Path) -> list[int]:
    """The tasks whose own scratch folder holds `checkpoint` (recorded as the path in its writer's mirror)."""
    relative = Path(checkpoint.parent.name) / checkpoint.name
    return [task for task, mirror in mirrors.items() if (mirror / relative).is_dir()]


def test_asha_across_two_tasks_that_share_no_folder_with_one_cancelled_mid_trial(
    tmp_path, postgres_url, slurm_cluster, s3_bucket
):
    """Trial 0 is the top of every rung, so ASHA promotes it to the end: every configuration trains the same (only
    its sleep per step is searched) and ties go to the lower number. While trial 0 waits at a rung, paused with its
    checkpoint on one task only, that task is cancelled mid-trial (scancel): the promotion must run on the other
    task from the store, and the trial it was training is retried there from its checkpoint in the store."""
    name = f"s3-asha-{uuid.uuid4().hex[:8]}"
    url = f"s3://{s3_bucket}/{name}"
    n_trials = 6
    slow_study(
        tmp_path,
        delay=0.3,
        study={
            "name": name,
            "n_trials": n_trials,
            "output_dir": url,
            # The paper's rule: a trial alone at a rung pauses there (hpo's default would let it go on in place).
            "scheduler": {**ASHA, "promote_underfilled": False},
            "sampler": {"type": "random", "seed": 0},
        },
        training={"max_steps": 32, "lr_scheduler_type": "linear", "save_steps": 2},
        search_space={  # merged over the task's own space: its learning rate held at one value
            "learning_rate": {"type": "categorical", "choices": [0.05]},
            "delay": {"type": "categorical", "choices": [0.25, 0.3, 0.35]},
        },
    )
    started = time.monotonic()
    job_id, tasks = _submit(tmp_path, postgres_url)

    def trial_zero_paused_on_a_task_that_trains() -> int | None:
        mirrors = _task_mirrors(tmp_path, job_id, url)
        trials = stored_trials(postgres_url, name)
        zero = next((t for t in trials if t.number == 0), None)
        if set(mirrors) != {0, 1} or zero is None or not pause.is_paused(zero):
            return None
        checkpoint = pause.checkpoint_of(zero)
        holders = _held_by(mirrors, checkpoint) if checkpoint is not None else []
        training = {_task_of(t) for t in trials if t.state == TrialState.RUNNING}
        if len(holders) == 1 and holders[0] in training:
            return holders[0] + 1  # wait_for wants a true value
        return None

    cancelled = (
        wait_for(trial_zero_paused_on_a_task_that_trains, timeout=300, what="trial 0 paused on one task") - 1
    )
    other = 1 - cancelled
    subprocess.run(["scancel", f"{job_id}_{cancelled}"], check=True)  # SIGTERM to every process of that task
    states = _wait_until_ended(job_id, tasks)
    elapsed = time.monotonic() - started
    assert states[cancelled] == "CANCELLED" and states[other] == "COMPLETED", states

    trials = stored_trials(postgres_url, name)
    finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    # The trial the cancelled task was training is failed and queued again, one way or another: its worker records
    # the interrupt once the trial saved; or the trial's process died of SLURM's SIGTERM before it could save (a
    # process just forked, its handler not yet set), and its worker records a crash; or SLURM's KillWait (30 s) ran
    # out first, and the other task's heartbeat check fails it as crashed. CI, 2026-11-29: 7 trials, none interrupted.
    stopped = [t for t in trials if t.state == TrialState.FAIL and t.user_attrs.get("requeued")]
    states = [(t.number, t.state.name, t.user_attrs.get("error")) for t in trials]
    assert len(finished) == n_trials, states
    assert len(trials) == n_trials + len(stopped) and len(stopped) == 1, states  # n_trials exact
    assert stopped[0].user_attrs.get("interrupted") or stopped[0].user_attrs.get("crashed"), states
    print(f"the cancelled task's trial {stopped[0].number}: {stopped[0].user_attrs.get('error')}")
    [retry] = [t for t in finished if t.user_attrs.get("requeued_from_trial") == stopped[0].number]
    if stopped[0].user_attrs.get("interrupted_step", -1) >= 0:
        assert retry.user_attrs.get("resume_from"), (
            retry.user_attrs
        )  # went on from the checkpoint in the store
    # The promotion crossed: trial 0 went on on the other task, from the checkpoint the cancelled task had uploaded.
    [zero] = [t for t in trials if t.number == 0]
    assert zero.state == TrialState.COMPLETE
    assert any(f["bytes"] > 0 for f in zero.user_attrs.get("fetched") or []), zero.user_attrs.get("fetched")

    mirrors = _task_mirrors(tmp_path, job_id, url)
    assert set(mirrors) == {0, 1}
    held = {
        task: {p.parent.name for p in m.glob("trial-*/checkpoint-*") if p.is_dir()}
        for task, m in mirrors.items()
    }
    assert held[0] and held[1], held  # both tasks trained
    figures = _figures(f"ASHA, 2 tasks, scancel of task {cancelled} ({elapsed:.0f} s)", trials)
    assert figures["up_per_trial"] > 0 and figures["fetched_from_store"] >= 1

    export, out = _export_from_store(tmp_path, postgres_url, s3_bucket, name)
    assert _reload_difference(export, out) == 0


def _decided_member_held_by_one_task(folder: Path, job_id: str, url: str, name: str, postgres_url: str):
    """(task, trial, step) of a PBT member paused at an interval, decided there and not exploited (so it resumes from
    its own checkpoint), whose checkpoint only `task` holds on its disk; None while there is none."""
    mirrors = _task_mirrors(folder, job_id, url)
    if set(mirrors) != {0, 1}:
        return None
    for trial in stored_trials(postgres_url, name):
        checkpoint = pause.checkpoint_of(trial)
        if not pause.is_paused(trial) or checkpoint is None:
            continue
        step = int(pause.pause_info(trial)["step"])
        if step not in (trial.system_attrs.get(DECIDED) or []) or exploited_at(trial, step):
            continue
        holders = _held_by(mirrors, checkpoint)
        if len(holders) == 1:
            return holders[0], trial, step
    return None


def test_pbt_across_two_tasks_that_share_no_folder(tmp_path, postgres_url, slurm_cluster, s3_bucket):
    """A member paused on one task is continued by the other: the task that trained it is cancelled (scancel) while
    the member waits, decided and not exploited, so the other task must fetch its checkpoint from the store."""
    name = f"s3-pbt-{uuid.uuid4().hex[:8]}"
    url = f"s3://{s3_bucket}/{name}"
    write_study(
        tmp_path,
        study={
            "name": name,
            "output_dir": url,
            "scheduler": {**PBT, "max_resource": 16},
            "sampler": {"type": "random", "seed": 0},
        },
        model={"delay": 0.05},
        training={"max_steps": None, "lr_scheduler_type": "linear"},
        search_space={"learning_rate": {"type": "float", "low": 1.0e-4, "high": 0.5, "log": True}},
        resources={"heartbeat_interval": 1, "grace_period": 3},
    )
    started = time.monotonic()
    job_id, tasks = _submit(tmp_path, postgres_url)
    cancelled, member, step = wait_for(
        lambda: _decided_member_held_by_one_task(tmp_path, job_id, url, name, postgres_url),
        timeout=300,
        what="a decided PBT member paused with its checkpoint on one task only",
    )
    subprocess.run(["scancel", f"{job_id}_{cancelled}"], check=True)
    states = _wait_until_ended(job_id, tasks)
    assert states[cancelled] == "CANCELLED" and states[1 - cancelled] == "COMPLETED", states
    trials = stored_trials(postgres_url, name)
    latest = latest_by_member(trials)
    assert len(latest) == 4 and {t.state for t in latest.values()} == {TrialState.COMPLETE}
    assert all(t.state == TrialState.COMPLETE or t.user_attrs.get("requeued") for t in trials)
    # The member went on on the task that remained, from the checkpoint the cancelled task had uploaded.
    by_number = {t.number: t for t in trials}
    chain = members(trials)[member_of(member, by_number)]
    fetched = [f for t in chain for f in t.user_attrs.get("fetched") or [] if f["bytes"] > 0]
    assert fetched, [(t.number, t.state.name, t.user_attrs.get("fetched")) for t in chain]
    # Members copied sources at the intervals (an exploit fetches its source through the store when the other task
    # trained it; a copy that failed would have left no segment with a source).
    copies = [s for t in latest.values() for s in segments(t) if s.source is not None]
    assert copies
    label = f"PBT, 2 tasks, population 4, scancel of task {cancelled} while member {member.number} waited at step {step}"
    _figures(f"{label} ({time.monotonic() - started:.0f} s)", trials)
    export, out = _export_from_store(tmp_path, postgres_url, s3_bucket, name)
    assert _reload_difference(export, out) == 0


def test_tasks_that_share_no_folder_give_the_model_one_machine_gives(
    tmp_path, postgres_url, slurm_cluster, s3_bucket
):
    """The same configurations and steps, on a 2-task array with the store, and on one machine with a local folder:
    the same best value and bit-for-bit the same exported model."""
    configurations = [{"learning_rate": lr} for lr in (0.003, 0.03, 0.01, 0.1)]
    results = {}
    for where in ("cluster", "one-machine"):
        folder = tmp_path / where
        name = f"s3-same-{where}-{uuid.uuid4().hex[:8]}"
        output = f"s3://{s3_bucket}/{name}" if where == "cluster" else str(folder / "out")
        write_study(
            folder,
            study={
                "name": name,
                "n_trials": 4,
                "output_dir": output,
                "enqueue": configurations,
                "pruner": {"type": "none"},
            },
            training={"max_steps": 12},
            # One thread on both sides: bitwise equality needs the same float summation order. A grace period a
            # loaded 2-core machine cannot miss: a crash retry is exact too, but a sampled trial can take its place
            # (a retry is queued after its trial is failed, and another worker may ask in between).
            resources={"heartbeat_interval": 1, "grace_period": 15, "threads_per_trial": 1},
        )
        if where == "cluster":
            job_id, tasks = _submit(folder, postgres_url)
            assert set(_wait_until_ended(job_id, tasks).values()) == {"COMPLETED"}
            export, out = _export_from_store(folder, postgres_url, s3_bucket, name)
        else:
            done = _hpo(folder, "run", "study.yaml", "--storage", postgres_url, "--workers", "1")
            assert done.returncode == 0, done.stdout + done.stderr
            exported = _hpo(folder, "export", "study.yaml", "--storage", postgres_url, "--out", "export")
            assert exported.returncode == 0, exported.stdout + exported.stderr
            export, out = folder / "export", exported.stdout
        study = optuna.load_study(study_name=name, storage=create_storage(postgres_url))
        assert _reload_difference(export, out) == 0
        results[where] = (
            study.best_value,
            study.best_trial.params,
            safetensors.torch.load_file(export / "model.safetensors"),
        )
    (value_a, params_a, weights_a), (value_b, params_b, weights_b) = (
        results["cluster"],
        results["one-machine"],
    )
    assert value_a == value_b and params_a == params_b
    difference = max(float((weights_a[k] - weights_b[k]).abs().max()) for k in weights_b)
    assert weights_a.keys() == weights_b.keys() and difference == 0.0
    print(
        f"2 tasks sharing no folder vs one machine: best value {value_a} both, exported weights max difference {difference}"
    )
