"""The shipped digits study (studies/digits_mlp.yaml) glued by hand with Optuna alone: what hpo replaces.

    python bench/peer_optuna.py --out /tmp/optuna-alone            # 30 trials, 2 processes on one SQLite storage
    python bench/peer_optuna.py --out /tmp/o --trials 1 --epochs 1 --processes 1   # start-up cost

The most common setup: a TPE sampler and a Hyperband pruner on a SQLite storage, `study.optimize` in two processes
sharing it, and a hand-written PyTorch loop as the objective (bench/peer_common.py: same split, model, optimizer,
schedule, clipping, batch sizes, seed and search space as the study file), the known-good point enqueued first, one
evaluation per epoch reported at the global step, and a trial scored by its best evaluation. No checkpoints and no
tracking: a user gluing Optuna by hand rarely writes them. Prints one JSON line: wall seconds, best value, counts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import optuna
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_common import ENQUEUED, SEED, STUDY, DigitsRun, Events, digits, sample  # noqa: E402


def make_objective(epochs: int, events: str | None = None):
    data = digits.data()  # once per process, as a hand-written script does

    def objective(trial: optuna.Trial) -> float:
        run = DigitsRun(sample(trial), epochs, data)
        log = Events(events, trial.number)
        best = -1.0
        try:
            for epoch in range(1, epochs + 1):
                value = run.epoch()
                log.add(epoch, value)
                best = max(best, value)
                trial.report(value, run.step)
                if trial.should_prune():
                    raise optuna.TrialPruned()
        finally:
            log.write()
        return best

    return objective


def make_study(storage: str, seed: int) -> optuna.Study:
    return optuna.create_study(
        study_name=STUDY,
        storage=storage,
        direction="maximize",
        load_if_exists=True,
        sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=8, multivariate=True),
        pruner=optuna.pruners.HyperbandPruner(min_resource=45, max_resource=900, reduction_factor=3),
    )


def worker(storage: str, seed: int, trials: int, epochs: int, events: str | None) -> None:
    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = make_study(storage, seed)
    study.optimize(
        make_objective(epochs, events),
        callbacks=[optuna.study.MaxTrialsCallback(trials, states=None)],  # the processes share one budget
        n_trials=trials,
    )


def run(out: Path, trials: int, epochs: int, processes: int, seed: int) -> float:
    """Create the study, enqueue the known-good point, start the worker processes; wall seconds until they end."""
    out.mkdir(parents=True, exist_ok=True)
    storage = f"sqlite:///{out / 'study.db'}"
    started = time.perf_counter()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = make_study(storage, seed)
    study.enqueue_trial(ENQUEUED)
    command = [sys.executable, __file__, "--worker", "--storage", storage, "--trials", str(trials)]
    command += ["--epochs", str(epochs), "--events", str(out / "events.jsonl")]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    children = [
        subprocess.Popen([*command, "--seed", str(seed + index)], env=env) for index in range(processes)
    ]
    codes = [child.wait() for child in children]
    if any(codes):
        raise SystemExit(f"an Optuna worker failed: exit codes {codes}")
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/optuna_alone"))
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--storage", help=argparse.SUPPRESS)
    parser.add_argument("--events", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.worker:
        worker(options.storage, options.seed, options.trials, options.epochs, options.events)
        return
    wall = run(options.out, options.trials, options.epochs, options.processes, options.seed)
    study = optuna.load_study(study_name=STUDY, storage=f"sqlite:///{options.out / 'study.db'}")
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    pruned = [t for t in study.trials if t.state == optuna.trial.TrialState.PRUNED]
    best = max((t.value for t in done), default=float("nan"))
    print(json.dumps({"wall_s": round(wall, 2), "best": best, "complete": len(done), "pruned": len(pruned)}))


if __name__ == "__main__":
    main()
