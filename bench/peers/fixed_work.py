"""The gap on fixed work: hpo and Optuna alone train the same configurations, no pruner (`bench/peers/gap.py --fixed N`).

    python bench/peers/gap.py --fixed 12 --epochs 20      # 12 configurations trained to the end: the per-step cost
    python bench/peers/gap.py --fixed 30 --epochs 1       # 30 one-epoch trials: the per-trial cost (a pruned trial's)

On the shipped study the two tools' samplers draw different configurations and Hyperband prunes them differently, so
one run trains up to 20 % more steps, or larger networks, than the next: the gap mixes each tool's cost with its
draws. Here both train the same N configurations (drawn once from the study's space by a seeded random sampler) for
the same epochs, on 2 processes, with no pruner: what remains between them is what each costs to run a trial.

hpo: the shipped study file with its pruner removed, `n_trials: N`, the configurations enqueued and
`num_train_epochs` set, run as `hpo run FILE`. Optuna alone: the configurations enqueued in one SQLite study, two
`spawn` processes taking them one at a time (under a file lock: Optuna's pop of an enqueued trial is not atomic on
SQLite) and training them with bench/peers/common.py's hand loop, reporting each evaluation as the glue does.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import STUDY, DigitsRun, digits, sample  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
STUDY_FILE = ROOT / "studies" / "digits_mlp.yaml"
CONFIGURATIONS_SEED = 1
STEPS_PER_EPOCH = (
    45  # 1,437 training images at batch 32 (hpo reports no steps without a pruner: counted here)
)


def configurations(count: int, seed: int = CONFIGURATIONS_SEED) -> list[dict[str, Any]]:
    """`count` points of the study's space (peer_common.sample), drawn by a seeded random sampler."""
    draws = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    points = []
    for _ in range(count):
        trial = draws.ask()
        points.append(sample(trial))
        draws.tell(trial, 0.0)
    return points


def write_hpo_study(folder: Path, points: list[dict[str, Any]], epochs: int) -> Path:
    """The shipped study file, changed only as the fixed work needs; its task modules resolve from the repository."""
    spec = yaml.safe_load(STUDY_FILE.read_text(encoding="utf-8"))
    # `none`, not left out: without a pruner section a study with evaluations gets the median pruner
    spec["study"]["pruner"] = {"type": "none"}
    spec["study"].update(output_dir=str(folder / "out"), n_trials=len(points), enqueue=points)
    spec["training"]["num_train_epochs"] = epochs
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def run_glue(folder: Path, points: list[dict[str, Any]], epochs: int, processes: int = 2) -> float:
    """Optuna alone on the fixed work; wall seconds from creating the study to the last process's exit."""
    folder.mkdir(parents=True, exist_ok=True)
    storage = f"sqlite:///{folder / 'study.db'}"
    started = time.perf_counter()
    study = optuna.create_study(study_name=STUDY, storage=storage, direction="maximize")
    for point in points:
        study.enqueue_trial(point)
    os.environ["OMP_NUM_THREADS"] = "1"  # inherited by the spawned processes before they import torch
    context = multiprocessing.get_context("spawn")
    children = [
        context.Process(target=_glue_worker, args=(storage, str(folder / "ask.lock"), epochs))
        for _ in range(processes)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join()
    if any(child.exitcode for child in children):
        raise SystemExit(f"an Optuna worker failed: exit codes {[child.exitcode for child in children]}")
    return time.perf_counter() - started


def _glue_worker(storage: str, lock: str, epochs: int) -> None:
    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    data = digits.data()  # once per process, as a hand-written script does
    study = optuna.load_study(study_name=STUDY, storage=storage)
    waiting = (optuna.trial.TrialState.WAITING,)
    while True:
        with open(lock, "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            if not study.get_trials(deepcopy=False, states=waiting):
                return
            trial = study.ask()
        run, best = DigitsRun(sample(trial), epochs, data), -1.0
        for _ in range(epochs):
            value = run.epoch()
            best = max(best, value)
            trial.report(value, run.step)
        study.tell(trial, best)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Optuna alone on fixed work (bench/peers/gap.py --fixed runs this)"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--fixed", type=int, required=True, help="configurations")
    parser.add_argument("--epochs", type=int, default=20)
    options = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    wall = run_glue(options.out, configurations(options.fixed), options.epochs)
    print(json.dumps({"wall_s": round(wall, 2)}))


if __name__ == "__main__":
    main()
