"""Promotion-type ASHA against stop-type successive halving and Hyperband (Optuna's pruners) on the digits study.

    python bench/asha.py                             # 27 configurations, 2 workers, target accuracy 0.97
    python bench/asha.py --trials 40 --target 0.975 --only asha,hyperband

The digits study (studies/digits_mlp.yaml: an MLP on scikit-learn's digits, 20 epochs of 45 steps, an evaluation each
epoch) is run once per contender with the same budget and the same worker count: the same N configurations, drawn
once from the study's search space with a fixed seed and enqueued in the same order, so only the scheduler differs.
- asha: `study.scheduler: {type: asha, resource: epochs, min_resource: 1, max_resource: 20, reduction_factor: 3}`;
  trials pause at epochs 1, 3, 9 and the top third of each rung is resumed from its checkpoint;
- successive_halving / hyperband: Optuna's pruners (min_resource 45 steps = 1 epoch, reduction factor 3), which stop
  trials instead.
Figures per contender: the time from the first trial's start until the best value the study has seen (a trial's
value when it pauses or ends) reaches `--target`; the best value at the end; the trial-steps spent (the sum of each
trial's last global step: a resumed trial's steps count once); wall time. Then the ratios of ASHA to each, and ASHA's
measured cost per promotion (pause: save + exit; resume: restart + restore up to the first step).
Ray Tune's ASHAScheduler is not run here: ray is not installed in this environment (see the closing note of issue 14).
Other processes on the machine slow every contender alike only if they stay steady: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import optuna
import yaml
from optuna.trial import FrozenTrial, TrialState

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hpo.scheduling.rung_view import promotion_overhead  # noqa: E402
from hpo.spec import load_study_spec  # noqa: E402
from hpo.storage.study_db import load_existing_study  # noqa: E402
from hpo.study import run_study  # noqa: E402
from hpo.trial.space import sample_params  # noqa: E402

STUDY = ROOT / "studies" / "digits_mlp.yaml"
CONTENDERS = {
    "asha": {
        "scheduler": {
            "type": "asha",
            "resource": "epochs",
            "min_resource": 1,
            "max_resource": 20,
            "reduction_factor": 3,
        }
    },
    "successive_halving": {
        "pruner": {"type": "successive_halving", "min_resource": 45, "reduction_factor": 3}
    },
    "hyperband": {
        "pruner": {"type": "hyperband", "min_resource": 45, "max_resource": 900, "reduction_factor": 3}
    },
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


def configurations(n: int, seed: int) -> list[dict]:
    """N points of the study's search space, drawn once, so every contender sees the same ones in the same order."""
    spec = load_study_spec(STUDY)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    points = []
    for _ in range(n):
        trial = study.ask()
        points.append(sample_params(trial, spec.search_space))
        study.tell(trial, 0.0)
    return points


def study_file(folder: Path, name: str, points: list[dict]) -> Path:
    data = yaml.safe_load(STUDY.read_text())
    study = {k: v for k, v in data["study"].items() if k not in ("pruner", "scheduler", "enqueue")}
    study.update(
        name=f"asha_bench_{name}",
        output_dir=str(folder / name),
        n_trials=len(points),
        enqueue=points,
        sampler={"type": "random", "seed": 0},
        **CONTENDERS[name],
    )
    data["study"] = study
    data["tracking"] = {"store": False}
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


def measure(name: str, path: Path, workers: int, target: float) -> Result:
    started = time.time()
    run_study(path, workers=workers, dry_run=False)
    wall = time.time() - started
    spec = load_study_spec(path)
    trials = load_existing_study(spec).get_trials(deepcopy=False)
    first = min(t.datetime_start.timestamp() for t in trials if t.datetime_start)
    events = sorted(e for t in trials for e in reported(t))
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
    if asha.overhead is not None:
        o = asha.overhead
        print(
            f"asha per promotion ({o['promotions']}): pause {o['pause_s']:.2f} s (save + exit), "
            f"resume {o['resume_s']:.2f} s (restart + restore, to the first step)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=27)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--target", type=float, default=0.97)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=",".join(CONTENDERS), help="comma-separated contenders")
    parser.add_argument("--keep", action="store_true", help="keep the study folders")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    points = configurations(args.trials, args.seed)
    folder = Path(tempfile.mkdtemp(prefix="asha-bench-"))
    results = []
    try:
        for name in args.only.split(","):
            print(f"-- {name}: {args.trials} configurations, {args.workers} workers", flush=True)
            results.append(measure(name, study_file(folder, name, points), args.workers, args.target))
    finally:
        if args.keep:
            print(f"studies kept in {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    report(results, args.target)


if __name__ == "__main__":
    main()
