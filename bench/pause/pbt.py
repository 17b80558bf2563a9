"""PBT against random search and TPE at the same compute, on digits where the learning-rate schedule matters.

    python bench/pause/pbt.py                          # population 8 x 480 steps against 8 trials x 480 steps each
    python bench/pause/pbt.py --members 6 --steps 360 --interval 40 --workers 2

The task: scikit-learn's digits with an MLP trained by plain SGD (momentum 0.9) at a *constant* learning rate, scored by
eval loss. A constant rate that is high enough to learn fast is too noisy to settle, so the best loss needs a rate that
falls during training: a schedule, which random search and TPE (one rate per trial, for the whole run) cannot express
and PBT finds by copying and perturbing (learning_rate x0.8 / x1.2, resampled with probability 0.25).

Each contender is one `hpo run` of the same study file but for `study.sampler` / `study.scheduler`, with the same
workers, the same number of configurations (members or trials) and the same steps each, so the compute is the same:
members x steps trial-steps. Printed per contender: the final eval loss of its best configuration (the model it would
ship), the trial-steps spent until some evaluation first reached the target (by default the final loss of random
search's best trial), and the wall time, each with its ratio to random search. Steps to target count trials run
`workers` at a time in number order, as the workers claim them; PBT's members advance in lockstep (all of them at step s
have spent members x s). The wall time includes PBT's pause/resume at every interval (save, new process, restore).

With `--ray-python PY` (a Python with ray[tune], e.g. the bench extra's .venv-bench/bin/python) Ray Tune's
PopulationBasedTraining (synch=True, so its members move in lockstep too) runs the same problem through bench/pause/ray_pbt.py,
starting from our PBT's initial learning rates; its row counts steps to target the same way and its wall time includes
Ray's start-up.

    python bench/pause/pbt.py --ray-python /path/to/.venv-bench/bin/python
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import optuna
import yaml

from hpo.storage import lineage

ROOT = Path(__file__).resolve().parents[2]
LR_LOW, LR_HIGH = 1e-3, 1.0


@dataclass
class Result:
    name: str
    best: float  # lowest final eval loss among the configurations
    curves: list[list[tuple[int, float]]]  # per trial (number order): (step, eval loss) at each evaluation
    wall_s: float
    members: bool = False
    replayed: float | None = None  # PBT: the final eval loss of `hpo retrain --replay` of the winner
    initial: list[float] | None = None  # PBT: each member's initial learning rate, in member order

    def steps_to(self, target: float, steps: int, workers: int) -> float:
        """Trial-steps spent until an evaluation first reached `target` (lower is better); inf when none did. Members
        advance in lockstep (all of them at step s: members x s); trials run `workers` at a time in number order."""
        reached = []
        for index, curve in enumerate(self.curves):
            for step, value in curve:
                if value <= target:
                    spent = (
                        len(self.curves) * step
                        if self.members
                        else (index // workers) * workers * steps + workers * step
                    )
                    reached.append(spent)
        return min(reached, default=math.inf)


def study_file(folder: Path, name: str, args: argparse.Namespace, kind: str) -> Path:
    study: dict = {
        "name": name,
        "output_dir": str(folder / name),
        "metric": "eval_loss",
        "direction": "minimize",
    }
    if kind == "pbt":
        study["scheduler"] = {
            "type": "pbt",
            "population": args.members,
            "perturbation_interval": args.interval,
            "max_resource": args.steps,
            "quantile_fraction": 0.25,
            "resample_probability": 0.25,
            "mutations": {"learning_rate": {"factors": [0.8, 1.2]}},
        }
        study["sampler"] = {"type": "random", "seed": args.seed}
    else:
        study["n_trials"] = args.members
        study["objective"] = "last"
        # Reports every evaluation as an intermediate value (steps to target need them) and never prunes.
        study["pruner"] = {"type": "median", "n_startup_trials": 1_000_000}
        study["sampler"] = (
            {"type": "tpe", "seed": args.seed, "n_startup_trials": max(2, args.members // 3)}
            if kind == "tpe"
            else {"type": "random", "seed": args.seed}
        )
    spec = {
        "study": study,
        "task": {
            "model_init": "studies.tasks.digits:model_init",
            "data": "studies.tasks.digits:data",
            "compute_metrics": "studies.tasks.digits:compute_metrics",
        },
        "model": {"hidden_size": 64, "num_layers": 1, "dropout": 0.0},
        "search_space": {"learning_rate": {"type": "float", "low": LR_LOW, "high": LR_HIGH, "log": True}},
        "training": {
            "max_steps": args.steps,
            "per_device_train_batch_size": 16,
            "per_device_eval_batch_size": 512,
            "optim": "sgd",
            "optim_args": {"momentum": 0.9},
            "lr_scheduler_type": "constant",
            "eval_strategy": "steps",
            "eval_steps": args.interval,
            "logging_steps": args.interval,
            "save_strategy": "steps" if kind == "pbt" else "no",
            "save_steps": args.interval,
            "seed": 0,
            "disable_tqdm": True,
        },
        "resources": {"threads_per_trial": 1},
        "tracking": {"store": False},
    }
    if kind != "pbt":
        spec["training"].pop("save_steps")
    else:
        spec["training"].pop("max_steps")
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def run(folder: Path, kind: str, args: argparse.Namespace) -> Result:
    path = study_file(folder, f"bench_{kind}", args, kind)
    started = time.perf_counter()
    command = [
        sys.executable,
        "-m",
        "hpo.cli",
        "run",
        str(path),
        "--workers",
        str(args.workers),
        "--no-dry-run",
    ]
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if finished.returncode != 0:
        raise SystemExit(f"{kind}: hpo run failed ({finished.returncode}): {finished.stderr[-2000:]}")
    study = optuna.load_study(
        study_name=f"bench_{kind}", storage=f"sqlite:///{folder / f'bench_{kind}' / 'study.db'}"
    )
    trials = sorted(study.get_trials(states=(optuna.trial.TrialState.COMPLETE,)), key=lambda t: t.number)
    curves = [sorted(evaluations(t)) for t in trials]
    result = Result(kind, min(t.values[0] for t in trials), curves, wall, members=kind == "pbt")
    if kind == "pbt":
        result.replayed = replay(path, folder / "replay")
        result.initial = [float(lineage.segments(t)[0].params["learning_rate"]) for t in trials]
    return result


def run_ray(python: str, folder: Path, rates: list[float], args: argparse.Namespace) -> Result:
    """Ray Tune's PopulationBasedTraining in its own interpreter (bench/pause/ray_pbt.py), from the same initial rates."""
    path = folder / "rates.json"
    path.write_text(json.dumps(rates))
    command = [
        python,
        str(ROOT / "bench" / "pause" / "ray_pbt.py"),
        "--rates",
        str(path),
        "--out",
        str(folder / "ray"),
    ]
    command += ["--steps", str(args.steps), "--interval", str(args.interval), "--cpus", str(args.workers)]
    command += ["--seed", str(args.seed)]
    started = time.perf_counter()
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    # The whole process, as for `hpo run`: importing ray, ray.init, the trials and ray.shutdown.
    wall = time.perf_counter() - started
    if finished.returncode != 0:
        raise SystemExit(
            f"ray_pbt: bench/pause/ray_pbt.py failed ({finished.returncode}): {finished.stderr[-2000:]}"
        )
    figures = json.loads(finished.stdout.strip().splitlines()[-1])
    if figures["complete"] != len(rates):
        raise SystemExit(f"ray_pbt: {figures['complete']} of {len(rates)} members reached step {args.steps}")
    curves = [[(int(step), float(value)) for step, value in curve] for curve in figures["curves"]]
    return Result("ray_pbt", float(figures["best"]), curves, wall, members=True)


def ray_python(value: str) -> str:
    """--ray-python must name an existing interpreter: checked before minutes of other contenders run."""
    if not Path(value).is_file():
        print(
            f"bench/pause/pbt.py: --ray-python {value}: no such file; give a Python that has ray[tune] "
            "(e.g. .venv-bench/bin/python), or leave the option out",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return value


def replay(path: Path, out: Path) -> float:
    """`hpo retrain --replay`: the winner's schedule trained from scratch in one run; its final eval loss."""
    command = [sys.executable, "-m", "hpo.cli", "retrain", str(path), "--replay", "--out", str(out)]
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if finished.returncode != 0:
        raise SystemExit(f"replay failed ({finished.returncode}): {finished.stderr[-2000:]}")
    return float(json.loads((out / "metrics.json").read_text())["final"]["eval_loss"])


def evaluations(trial: optuna.trial.FrozenTrial) -> list[tuple[int, float]]:
    """(step, eval loss) of every evaluation: the intermediate values (PBT's interval scores, the never-pruning
    pruner's reports) and the final value at the last step."""
    points = [(int(s), float(v)) for s, v in trial.intermediate_values.items()]
    points.append((int(trial.user_attrs.get("global_step") or 0), float(trial.values[0])))
    return points


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--members", type=int, default=8, help="PBT population = trials of random and TPE")
    parser.add_argument("--steps", type=int, default=480, help="steps per member / trial")
    parser.add_argument(
        "--interval", type=int, default=40, help="PBT perturbation interval = evaluation interval"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--target", type=float, default=None, help="eval loss target (default: random's best)"
    )
    parser.add_argument(
        "--ray-python",
        type=ray_python,
        help="a Python with ray[tune] (e.g. .venv-bench/bin/python): adds Ray Tune's PopulationBasedTraining",
    )
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    folder = Path(tempfile.mkdtemp(prefix="bench-pbt-"))
    try:
        results = {kind: run(folder, kind, args) for kind in ("random", "tpe", "pbt")}
        if args.ray_python:
            rates = results["pbt"].initial or []
            results["ray_pbt"] = run_ray(args.ray_python, folder, rates, args)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    target = args.target if args.target is not None else results["random"].best
    base = results["random"]
    print(
        f"digits, SGD at a constant rate, {args.members} configurations x {args.steps} steps, {args.workers} workers"
    )
    print(f"target eval loss {target:.4f}")
    print(
        f"{'contender':10} {'final loss':>10} {'vs random':>10} {'steps to target':>16} {'speed-up':>9} "
        f"{'wall s':>8} {'vs random':>10}"
    )
    for result in results.values():
        to_target = result.steps_to(target, args.steps, args.workers)
        ratio = (
            base.steps_to(target, args.steps, args.workers) / to_target if math.isfinite(to_target) else 0.0
        )
        print(
            f"{result.name:10} {result.best:10.4f} {result.best / base.best:10.3f} {to_target:16.0f} "
            f"{ratio:8.2f}x {result.wall_s:8.1f} {result.wall_s / base.wall_s:9.2f}x"
        )
    strict = 0.8 * target
    reached = {r.name: r.steps_to(strict, args.steps, args.workers) for r in results.values()}
    shown = ", ".join(
        f"{name} {steps:.0f}" if math.isfinite(steps) else f"{name} never" for name, steps in reached.items()
    )
    print(f"trial-steps to a stricter target, eval loss {strict:.4f} (0.8 x target): {shown}")
    pbt = results["pbt"]
    print(
        f"replay of the PBT winner's schedule from scratch (hpo retrain --replay): final eval loss {pbt.replayed:.6f}"
    )
    print(f"the winner itself: {pbt.best:.6f} ({'identical' if pbt.replayed == pbt.best else 'differs'})")
    if "ray_pbt" in results:
        # Both populations started from these (bench/pause/ray_pbt.py --rates takes them as a JSON list).
        print(
            f"initial learning rates of the members: {json.dumps([round(r, 6) for r in pbt.initial or []])}"
        )
        print(ray_versus_ours(results["ray_pbt"], pbt, target, strict, args))


def ray_versus_ours(ray: Result, pbt: Result, target: float, strict: float, args: argparse.Namespace) -> str:
    """Ray's PBT as ratios to ours (above 1: Ray's loss is higher, it needs more steps, it takes longer)."""

    def steps(result: Result, level: float) -> float:
        return result.steps_to(level, args.steps, args.workers)

    def ratio(theirs: float, ours: float) -> str:
        if math.isfinite(theirs) and math.isfinite(ours):
            return f"{theirs / ours:.2f}x"
        shown = [f"{value:.0f}" if math.isfinite(value) else "never" for value in (theirs, ours)]
        return f"{shown[0]} vs {shown[1]}"

    return (
        f"ray_pbt / pbt: final eval loss {ray.best / pbt.best:.2f}x, trial-steps to {target:.4f} "
        f"{ratio(steps(ray, target), steps(pbt, target))}, to {strict:.4f} {ratio(steps(ray, strict), steps(pbt, strict))}, "
        f"wall {ray.wall_s / pbt.wall_s:.2f}x"
    )


if __name__ == "__main__":
    main()
