"""The out-of-memory requeue on a real GPU: a trial that outgrows the GPU beside others is queued again and completes
alone; a trial that asks for more than the GPU has fails in one line.

    python bench/gpu/oom.py              # on a GPU machine (about a minute on an H200)
    python bench/gpu/oom.py --check      # write and validate the study file only (runs on CPU)

One study (`hpo run study.yaml --gpus 0`, `resources.trials_per_gpu: auto`) of four enqueued trials of
`packing_task:profile_init`, sized from the GPU's total memory T:
- two `steady` trials of 0.3 T each;
- a `grower`: 0.03 T while the GPU gate measures it, 0.8 T from its 10th step on: beside a steady trial it runs out of
  memory (0.3 T + 0.8 T > T); alone it fits. It must be queued again (`oom_retry`) and complete;
- a `hog`: 1.5 T from its first step. Beside others it is queued again to run alone; alone it fails with one line.
Prints each configuration's attempts (trial number, state, the error's first line) and `==` summary lines.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import optuna
import yaml
from optuna.trial import FrozenTrial
from packing import CONFIG_ERROR, TASK, on_gpu_from  # bench/gpu/ is this script's folder

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.common import hpo_command  # noqa: E402
from hpo.scheduling.gpu_memory import read_gpu_memory  # noqa: E402  (NVML only: this process never starts CUDA)

PROFILES = ("steady", "steady", "grower", "hog")
NAME = "gpu-oom"


def study_spec(folder: Path, total_gib: float, steps: int) -> dict:
    return {
        "study": {
            "name": NAME,
            "output_dir": str(folder / "out"),
            "metric": "accuracy",
            "direction": "maximize",
            "n_trials": len(PROFILES),
            "sampler": {"type": "random", "seed": 0},
            "pruner": {"type": "none"},
            # `copy` tells the two steady trials apart: an enqueued point equal to one already queued is skipped
            "enqueue": [
                {"profile": profile, "copy": PROFILES[:n].count(profile)}
                for n, profile in enumerate(PROFILES)
            ],
        },
        "task": {
            "model_init": "packing_task:profile_init",
            "data": "packing_task:feature_data",
            "compute_metrics": "packing_task:accuracy",
        },
        "model": {
            "batch_size": 32,
            "steady_gib": round(0.3 * total_gib, 1),
            "grower_start_gib": round(0.03 * total_gib, 1),
            "grower_gib": round(0.8 * total_gib, 1),
            "grow_at": 10,
            "hog_gib": round(1.5 * total_gib, 1),
        },
        "training": {
            "max_steps": steps,
            "per_device_train_batch_size": 32,
            "per_device_eval_batch_size": 32,
            "eval_strategy": "no",
            "save_strategy": "no",
            "logging_steps": max(1, steps // 4),
            "bf16": True,
            "disable_tqdm": True,
        },
        "search_space": {
            "profile": {"type": "categorical", "choices": ["steady", "grower", "hog"]},
            "copy": {"type": "int", "low": 0, "high": 1},
        },
        "resources": {"trials_per_gpu": "auto", "threads_per_trial": 1},
        "tracking": {"store": False},
    }


def write_study(folder: Path, total_gib: float, steps: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / TASK.name).write_text(TASK.read_text())
    path = folder / "study.yaml"
    path.write_text(
        "# python bench/gpu/oom.py\n" + yaml.safe_dump(study_spec(folder, total_gib, steps), sort_keys=False)
    )
    return path


def attempts(database: Path) -> dict[str, list[FrozenTrial]]:
    study = optuna.load_study(study_name=NAME, storage=f"sqlite:///{database}")
    by_profile: dict[str, list[FrozenTrial]] = {}
    for trial in sorted(study.trials, key=lambda t: t.number):
        by_profile.setdefault(f"{trial.params.get('profile')}", []).append(trial)
    return by_profile


def describe(trial: FrozenTrial, t0: datetime) -> str:
    """One attempt: its number, state, whether it ran alone, its seconds from the study's first start, its error."""
    error = str(trial.user_attrs.get("error") or trial.system_attrs.get("fail_reason") or "")
    lines = error.strip().splitlines()
    shown = (
        f": {lines[0][:220]}" + (f" (+{len(lines) - 1} more lines)" if len(lines) > 1 else "")
        if lines
        else ""
    )
    alone = " [alone]" if trial.user_attrs.get("oom_retry") else ""
    start, end = (seconds_since(t0, moment) for moment in (trial.datetime_start, trial.datetime_complete))
    admitted = on_gpu_from(trial)
    gate = (
        f" (on the GPU from {seconds_since(t0, admitted):.1f} s, {trial.user_attrs.get('gpu_admission')})"
        if admitted is not trial.datetime_start
        else ""
    )
    return f"#{trial.number} {trial.state.name}{alone} {start:.1f}-{end:.1f} s{gate}{shown}"


def seconds_since(t0: datetime, moment: datetime | None) -> float:
    return (moment - t0).total_seconds() if moment is not None else float("nan")


def overlapping_alone(trials: list[FrozenTrial]) -> list[str]:
    """Pairs 'a+b' where an attempt that was to run alone (`oom_retry`) was on the GPU at the same time as another
    attempt (from its admission by the GPU gate to its end): what the gate must never let happen."""
    timed = [
        (t, on_gpu_from(t), t.datetime_complete)
        for t in trials
        if on_gpu_from(t) is not None and t.datetime_complete is not None
    ]
    return [
        f"{alone.number}+{other.number}"
        for alone, alone_from, alone_end in timed
        if alone.user_attrs.get("oom_retry")
        for other, other_from, other_end in timed
        if other.number != alone.number and other_from < alone_end and alone_from < other_end
    ]


def report(by_profile: dict[str, list[FrozenTrial]], seconds: float, code: int) -> None:
    print(f"hpo run exit {code} in {seconds:.0f} s")
    every = [trial for trials in by_profile.values() for trial in trials]
    t0 = min((t.datetime_start for t in every if t.datetime_start is not None), default=datetime.now())
    for profile, trials in by_profile.items():
        print(f"{profile}:")
        for trial in trials:
            print(f"  {describe(trial, t0)}")
    grower = by_profile.get("grower", [])
    hog = by_profile.get("hog", [])
    steady = by_profile.get("steady", [])
    print(
        f"== oom grower: {len(grower)} attempt(s), last {grower[-1].state.name if grower else '-'}, "
        f"requeued alone: {any(t.user_attrs.get('oom_retry') for t in grower)}"
    )
    last_error = str(hog[-1].user_attrs.get("error", "")) if hog else ""
    print(
        f"== oom hog: {len(hog)} attempt(s), last {hog[-1].state.name if hog else '-'}, "
        f"its error {'one line' if last_error and len(last_error.splitlines()) == 1 else 'NOT one line'}: "
        f"{last_error[:200]}"
    )
    print(f"== oom steady: {sum(t.state.name == 'COMPLETE' for t in steady)} of 2 complete")
    overlaps = overlapping_alone(every)
    print(f"== oom alone attempts beside another: {', '.join(overlaps) if overlaps else 'none'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--check", action="store_true", help="write the study file and validate it (no GPU)")
    parser.add_argument("--total-gib", type=float, default=None, help="size the trials for this GPU memory")
    parser.add_argument(
        "--keep", action="store_true", help="keep the study folder (its logs), printed at the end"
    )
    options = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="gpu-oom-"))
    try:
        return measure(folder, options)
    finally:
        if options.keep:
            print(f"study folder kept in {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


def measure(folder: Path, options: argparse.Namespace) -> int:
    if options.check:
        path = write_study(folder, options.total_gib or 80.0, options.steps)
        done = subprocess.run([*hpo_command(), "validate", str(path), "--no-dry-run"], cwd=folder, text=True)
        return done.returncode
    gpus = read_gpu_memory()
    if not gpus:
        print("no CUDA GPU visible here (NVML sees none): nothing to measure; run it on a GPU machine")
        return 0
    total_gib = options.total_gib or gpus[0].total / 2**30
    print(f"GPU 0: {gpus[0].name}, {total_gib:.1f} GiB; study in {folder}")
    held = ", ".join(f"pid {pid} {size / 2**30:.2f} GiB" for pid, size in gpus[0].processes.items()) or "none"
    # a process left by an earlier part would be counted as "held by other processes" in the trials' errors
    print(f"before the study: {gpus[0].used / 2**30:.2f} GiB in use; processes: {held}")
    path = write_study(folder, total_gib, options.steps)
    started = time.perf_counter()
    done = subprocess.run(
        [*hpo_command(), "run", str(path), "--gpus", "0"], cwd=folder, capture_output=True, text=True
    )
    (folder / "hpo.log").write_text(done.stdout + done.stderr)
    if done.returncode == CONFIG_ERROR:
        print(f"refused: {done.stderr.strip().splitlines()[-1:]}")
        return 1
    report(attempts(folder / "out" / "study.db"), time.perf_counter() - started, done.returncode)
    oom_lines = [line for line in (done.stdout + done.stderr).splitlines() if "memory" in line.lower()]
    print("hpo's lines about memory:", *oom_lines[:12], sep="\n  ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
