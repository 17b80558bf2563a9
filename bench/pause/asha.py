"""Promotion-type ASHA against stop-type successive halving and Hyperband (Optuna's pruners), on two problems.

    python bench/pause/asha.py                             # digits: 27 configurations, 2 workers, target accuracy 0.97
    python bench/pause/asha.py --trials 40 --target 0.975 --only asha,hyperband
    python bench/pause/asha.py --problem minilm-lora       # LoRA on MiniLM: 9 configurations, target 0.9 (4-8 min, 2 cores)

The digits study (studies/digits_mlp.yaml: an MLP on scikit-learn's digits, 20 epochs of 45 steps, an evaluation each
epoch) is run once per contender with the same budget and the same worker count: the same N configurations, drawn
once from the study's search space with a fixed seed and enqueued in the same order, so only the scheduler differs.
- asha: `study.scheduler: {type: asha, resource: epochs, min_resource: 1, max_resource: 20, reduction_factor: 3}`;
  trials pause at epochs 1, 3, 9 and the top third of each rung is resumed from its checkpoint (or trains on in place
  when promoted the moment it arrives); `asha_always_pause` (not run by default) pauses and resumes every promotion;
- successive_halving / hyperband: Optuna's pruners (min_resource 45 steps = 1 epoch, reduction factor 3), which stop
  trials instead.
Figures per contender: the time from the start of the run until the best-so-far evaluation accuracy (any
evaluation of any trial, timestamped by the experiment store) reaches `--target`; the best at the end; the trial-steps spent (the sum of each
trial's last global step: a resumed trial's steps count once); wall time. Then the ratios of ASHA to each, and ASHA's
measured cost per promotion (pause: save + exit; resume: restart + restore up to the first step).
With `--ray-python PY` (a Python with the bench extra, ray[tune]) Ray Tune's ASHAScheduler (stop-type, grace 1 epoch,
reduction factor 3) runs the same configurations through bench/pause/ray_asha.py; its time to target counts from ray.init.
`--problem minilm-lora` runs the same contenders on studies/minilm_lora.yaml (peft LoRA adapters on the pretrained
MiniLM-L6, generated reviews) cut short: 36 steps of 16 reviews, an evaluation every 4 steps, rungs at steps 4 and 12
(the pruners' min_resource 4 steps, Hyperband's max 36), 9 configurations. Ray is skipped there: bench/pause/ray_asha.py
trains the digits MLP only.
Other processes on the machine slow every contender alike only if they stay steady: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import yaml
from optuna.trial import FrozenTrial, TrialState

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from hpo.scheduling.rung_view import promotion_overhead  # noqa: E402
from hpo.spec import load_study_spec  # noqa: E402
from hpo.storage.study_db import load_existing_study  # noqa: E402
from hpo.study import run_study  # noqa: E402
from hpo.tracking.store import open_store  # noqa: E402
from hpo.trial.space import sample_params  # noqa: E402


def asha(min_resource: int, max_resource: int, resource: str, **more: Any) -> dict[str, Any]:
    return {
        "scheduler": {
            "type": "asha",
            "resource": resource,
            "min_resource": min_resource,
            "max_resource": max_resource,
            "reduction_factor": 3,
            **more,
        }
    }


def contenders(asha_min: int, asha_max: int, resource: str, min_steps: int, max_steps: int) -> dict[str, Any]:
    """ASHA's rungs in `resource` units; the Optuna pruners' in global steps (the same points)."""
    return {
        "asha": asha(asha_min, asha_max, resource),
        # Every promotion a pause and a resume (the paper's ASHA): what continuing in place saves.
        "asha_always_pause": asha(asha_min, asha_max, resource, continue_in_place=False),
        "successive_halving": {
            "pruner": {"type": "successive_halving", "min_resource": min_steps, "reduction_factor": 3}
        },
        "hyperband": {
            "pruner": {
                "type": "hyperband",
                "min_resource": min_steps,
                "max_resource": max_steps,
                "reduction_factor": 3,
            }
        },
    }


@dataclass
class Problem:
    study: Path
    contenders: dict[str, Any]
    trials: int
    target: float
    # Replaces keys of the study file's training section: the same for every contender.
    training: dict[str, Any]


PROBLEMS = {
    # 20 epochs of 45 steps, evaluated each epoch; rungs at epochs 1, 3, 9.
    "digits": Problem(
        ROOT / "studies" / "digits_mlp.yaml", contenders(1, 20, "epochs", 45, 900), 27, 0.97, {}
    ),
    # LoRA on the pretrained MiniLM (studies/minilm_lora.yaml), cut to a budget that fits a busy 2-core machine:
    # 36 steps of 16 reviews (576 examples, 3 epochs of its 192), evaluated every 4 steps; rungs at steps 4, 12. Nine
    # configurations, so eta 3 sends one to the end (with eight, the second rung's two have no top third). Warm-up
    # cut to 2 steps: a first rung at the end of a 4-step warm-up would rank adapters that have barely moved.
    "minilm-lora": Problem(
        ROOT / "studies" / "minilm_lora.yaml",
        contenders(4, 36, "steps", 4, 36),
        9,
        0.9,
        {
            "max_steps": 36,
            "eval_strategy": "steps",
            "eval_steps": 4,
            "logging_steps": 4,
            "warmup_ratio": 0.05,
        },
    ),
}


@dataclass
class Result:
    name: str
    wall_s: float
    to_target_s: float | None
    best: float
    trial_steps: int
    complete: int
    pruned: int
    overhead: dict[str, float] | None


def configurations(problem: Problem, n: int, seed: int) -> list[dict]:
    """N points of the study's search space, drawn once, so every contender sees the same ones in the same order."""
    spec = load_study_spec(problem.study)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    points = []
    for _ in range(n):
        trial = study.ask()
        points.append(sample_params(trial, spec.search_space))
        study.tell(trial, 0.0)
    return points


def study_file(problem: Problem, folder: Path, name: str, points: list[dict]) -> Path:
    data = yaml.safe_load(problem.study.read_text())
    study = {k: v for k, v in data["study"].items() if k not in ("pruner", "scheduler", "enqueue")}
    study.update(
        name=f"asha_bench_{name}",
        output_dir=str(folder / name),
        n_trials=len(points),
        enqueue=points,
        sampler={"type": "random", "seed": 0},
        **problem.contenders[name],
    )
    data["study"] = study
    data["training"] = {**data["training"], **problem.training}
    data["tracking"] = {"store": True}  # every evaluation with its time: the best-so-far curve
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def reported(trial: FrozenTrial) -> list[tuple[float, float]]:
    """(unix time, value) of each value the trial reported to the study: its pauses (ASHA) and its end."""
    events = [
        (p["at"], p["value"]) for p in trial.user_attrs.get("pauses") or [] if p.get("value") is not None
    ]
    if trial.state in (TrialState.COMPLETE, TrialState.PRUNED) and trial.value is not None:
        events.append((trial.datetime_complete.timestamp(), trial.value))
    return events


def evaluations(spec: Any) -> list[tuple[float, float]]:
    """(unix time, value) of every evaluation of the study's metric in any trial, from the experiment store."""
    store = open_store(spec.store_url)
    metric = (spec.study.metrics or ["eval_accuracy"])[0]
    rows = []
    for run in store.runs(study_name=spec.study.name, kind="trial"):
        rows += [
            (m["time"], m["value"]) for m in store.metrics(run["id"], name=metric) if m["value"] is not None
        ]
    return rows


def measure(name: str, path: Path, workers: int, target: float) -> Result:
    started = time.time()
    run_study(path, workers=workers, dry_run=False)
    wall = time.time() - started
    spec = load_study_spec(path)
    trials = load_existing_study(spec).get_trials(deepcopy=False)
    # From the moment `hpo run` was called (worker start included), like Ray's from ray.init: a resumed trial's Optuna
    # start time is its resume, so the trials' own start times would not say when the study began.
    first = started
    # Every evaluation counts (a trial stopped or paused later still showed its value); the reported values (pauses,
    # ends) are the fallback when the store has none.
    events = sorted(evaluations(spec) or [e for t in trials for e in reported(t)])
    reached = next((at for at, value in events if value >= target), None)
    return Result(
        name=name,
        wall_s=wall,
        to_target_s=None if reached is None else reached - first,
        best=max((value for _, value in events), default=float("nan")),
        trial_steps=sum(int(t.user_attrs.get("global_step") or 0) for t in trials),
        complete=sum(t.state == TrialState.COMPLETE for t in trials),
        pruned=sum(t.state == TrialState.PRUNED for t in trials),
        overhead=promotion_overhead(trials),
    )


def measure_ray(python: str, folder: Path, points: list[dict], workers: int, target: float) -> Result:
    """Ray Tune's stop-type ASHA in its own interpreter (bench/pause/ray_asha.py), on the same configurations."""
    path = folder / "points.json"
    path.write_text(json.dumps(points))
    command = [
        python,
        str(ROOT / "bench" / "pause" / "ray_asha.py"),
        "--points",
        str(path),
        "--out",
        str(folder / "ray"),
    ]
    command += ["--cpus", str(workers), "--target", str(target)]
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return Result(
        name="ray_tune_asha",
        wall_s=figures["wall_s"],
        to_target_s=figures["to_target_s"],
        best=figures["best"],
        trial_steps=figures["trial_steps"],
        complete=figures["complete"],
        pruned=figures["stopped"],
        overhead=None,
    )


def report(results: list[Result], target: float) -> None:
    print(
        f"\n{'contender':<20}{'wall s':>8}{f'to {target} s':>12}{'best':>8}{'trial-steps':>13}{'complete':>10}{'pruned':>8}"
    )
    for r in results:
        to_target = "never" if r.to_target_s is None else f"{r.to_target_s:.1f}"
        print(
            f"{r.name:<20}{r.wall_s:>8.1f}{to_target:>12}{r.best:>8.4f}{r.trial_steps:>13}{r.complete:>10}{r.pruned:>8}"
        )
    asha = next((r for r in results if r.name == "asha"), None)
    if asha is None:
        return
    for other in results:
        if other is asha:
            continue
        parts = [
            f"trial-steps {asha.trial_steps / other.trial_steps:.2f}x",
            f"wall {asha.wall_s / other.wall_s:.2f}x",
        ]
        if asha.to_target_s is not None and other.to_target_s is not None:
            parts.insert(0, f"time to {target} {asha.to_target_s / other.to_target_s:.2f}x")
        parts.append(f"best {asha.best - other.best:+.4f}")
        print(f"asha / {other.name}: " + ", ".join(parts))
    for r in results:
        if r.overhead is not None:
            o = r.overhead
            print(
                f"{r.name} per promotion by resume ({o['promotions']}): pause {o['pause_s']:.2f} s (save + exit), "
                f"resume {o['resume_s']:.2f} s (restart + restore, to the first step)"
            )


def ray_skipped(python: str, problem: str) -> str | None:
    """Why Ray Tune cannot run `problem`, or None: bench/pause/ray_asha.py trains the digits MLP only, and a LoRA trainable
    would need peft in Ray's interpreter (the bench extra does not install it)."""
    if problem == "digits":
        return None
    has_peft = subprocess.run([python, "-c", "import peft"], capture_output=True).returncode == 0
    return f"bench/pause/ray_asha.py has no {problem} trainable (digits only)" + (
        "" if has_peft else f", and {python} has no peft to train LoRA adapters with"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problem", choices=sorted(PROBLEMS), default="digits")
    parser.add_argument("--trials", type=int, help="configurations (digits: 27, minilm-lora: 9)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--target", type=float, help="eval accuracy to reach (digits: 0.97, minilm-lora: 0.9)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--only",
        default="asha,successive_halving,hyperband",
        help="comma-separated contenders among asha, asha_always_pause, successive_halving, hyperband",
    )
    parser.add_argument("--keep", action="store_true", help="keep the study folders")
    parser.add_argument(
        "--ray-python",
        help="a Python with ray[tune] (the bench extra, e.g. .venv-bench/bin/python): adds Ray Tune's ASHAScheduler",
    )
    args = parser.parse_args()
    problem = PROBLEMS[args.problem]
    trials = args.trials or problem.trials
    target = problem.target if args.target is None else args.target
    unknown = sorted(set(args.only.split(",")) - set(problem.contenders))
    if unknown:
        parser.error(f"--only: unknown contender(s) {unknown}; choose among {', '.join(problem.contenders)}")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    points = configurations(problem, trials, args.seed)
    folder = Path(tempfile.mkdtemp(prefix="asha-bench-"))
    results = []
    try:
        for name in args.only.split(","):
            print(f"-- {name}: {trials} configurations of {args.problem}, {args.workers} workers", flush=True)
            path = study_file(problem, folder, name, points)
            results.append(measure(name, path, args.workers, target))
        skipped = args.ray_python and ray_skipped(args.ray_python, args.problem)
        if skipped:
            print(f"-- ray_tune_asha skipped: {skipped}", flush=True)
        elif args.ray_python:
            print(f"-- ray_tune_asha: {trials} configurations, {args.workers} CPUs", flush=True)
            results.append(measure_ray(args.ray_python, folder, points, args.workers, target))
    finally:
        if args.keep:
            print(f"studies kept in {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    report(results, target)


if __name__ == "__main__":
    main()
