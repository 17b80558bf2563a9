"""The shipped digits study (studies/digits_mlp.yaml) glued by hand with Optuna alone: what hpo replaces.

    python bench/peers/optuna_alone.py --out /tmp/optuna-alone            # 30 trials, 2 processes on one SQLite storage
    python bench/peers/optuna_alone.py --out /tmp/o --trials 1 --epochs 1 --processes 1   # start-up cost
    python bench/peers/optuna_alone.py --problem minilm-lora --out /tmp/o-lora --trials 6 --steps 36   # LoRA on MiniLM

The most common setup: a TPE sampler and a Hyperband pruner on a SQLite storage, `study.optimize` in two `spawn` processes
sharing it, and a hand-written PyTorch loop as the objective (bench/peers/common.py: same split, model, optimizer,
schedule, clipping, batch sizes, seed and search space as the study file), the known-good point enqueued first, one
evaluation per epoch reported at the global step, and a trial scored by its best evaluation. No checkpoints and no
tracking: a user gluing Optuna by hand rarely writes them. Prints one JSON line: wall seconds, best value, counts.

`--problem minilm-lora`: the same glue around bench/peers/minilm_loop.py's hand loop (real peft LoRA on the pretrained
MiniLM, studies/minilm_lora.yaml's space and choices), with that study's sampler and pruner (TPE, 3 start-up trials;
median pruner after 2 complete trials), an evaluation every 4 steps reported at the global step, `--steps` long.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

import optuna
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ENQUEUED, SEED, STUDY, DigitsRun, Events, digits, sample  # noqa: E402


def make_objective(epochs: int, events: str | None = None, problem: str = "digits"):
    if problem == "minilm-lora":
        return lora_objective(epochs, events)
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


def lora_objective(steps: int, events: str | None):
    # Imported here, not at the top: peft imports transformers (seconds) that the digits problem should not pay for.
    import minilm_loop

    data = minilm_loop.data()  # once per process

    def objective(trial: optuna.Trial) -> float:
        run = minilm_loop.LoraRun(minilm_loop.sample(trial), steps, data)
        log = Events(events, trial.number)
        best = -1.0
        try:
            while not run.done:
                value = run.evaluation()
                log.add(run.epoch, value, step=run.step)
                best = max(best, value)
                trial.report(value, run.step)
                if trial.should_prune():
                    raise optuna.TrialPruned()
        finally:
            log.write()
        return best

    return objective


def make_study(storage: str, seed: int, problem: str = "digits") -> optuna.Study:
    if problem == "minilm-lora":
        import minilm_loop  # as in lora_objective: only this problem pays for peft's import

        return optuna.create_study(
            study_name=minilm_loop.STUDY,
            storage=storage,
            direction="maximize",
            load_if_exists=True,
            sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=minilm_loop.N_STARTUP_TRIALS),
            pruner=optuna.pruners.MedianPruner(n_startup_trials=minilm_loop.PRUNER_STARTUP_TRIALS),
        )
    return optuna.create_study(
        study_name=STUDY,
        storage=storage,
        direction="maximize",
        load_if_exists=True,
        sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=8, multivariate=True),
        pruner=optuna.pruners.HyperbandPruner(min_resource=45, max_resource=900, reduction_factor=3),
    )


def wait_for_the_enqueued_trial(study: optuna.Study, limit_s: float = 120.0) -> None:
    """Start asking only once the first process has taken the enqueued trial. On SQLite, Optuna's pop of a WAITING
    trial is not atomic (its `SELECT ... FOR UPDATE` is a plain SELECT there), so two processes starting together can
    both run the enqueued point and the second then fails with "Cannot tell a COMPLETE trial"."""
    deadline = time.monotonic() + limit_s
    while study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)):
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)


def worker(
    storage: str,
    seed: int,
    trials: int,
    epochs: int,
    events: str | None,
    problem: str = "digits",
    first_seed: int | None = None,
) -> None:
    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = make_study(storage, seed, problem)
    if seed != first_seed:
        wait_for_the_enqueued_trial(study)
    study.optimize(
        make_objective(epochs, events, problem),
        callbacks=[optuna.study.MaxTrialsCallback(trials, states=None)],  # the processes share one budget
        n_trials=trials,
    )


def run(out: Path, trials: int, epochs: int, processes: int, seed: int, problem: str = "digits") -> float:
    """Create the study, enqueue the known-good point, start the worker processes; wall seconds until they end.
    `epochs`: the length of a complete trial in the problem's unit (digits: epochs; minilm-lora: steps)."""
    out.mkdir(parents=True, exist_ok=True)
    storage = f"sqlite:///{out / 'study.db'}"
    started = time.perf_counter()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = make_study(storage, seed, problem)
    study.enqueue_trial(enqueued(problem))
    os.environ["OMP_NUM_THREADS"] = "1"  # inherited by the spawned processes before they import torch
    # `spawn`, as a script gluing Optuna by hand with multiprocessing does (fork after importing torch is unsafe).
    context = multiprocessing.get_context("spawn")
    events = str(out / "events.jsonl")
    children = [
        context.Process(target=worker, args=(storage, seed + index, trials, epochs, events, problem, seed))
        for index in range(processes)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join()
    codes = [child.exitcode for child in children]
    if any(codes):
        raise SystemExit(f"an Optuna worker failed: exit codes {codes}")
    return time.perf_counter() - started


def enqueued(problem: str) -> dict:
    if problem == "minilm-lora":
        import minilm_loop

        return minilm_loop.ENQUEUED
    return ENQUEUED


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", choices=["digits", "minilm-lora"], default="digits")
    parser.add_argument("--out", type=Path, default=Path("runs/optuna_alone"))
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--epochs", type=int, default=20, help="digits: epochs per trial")
    parser.add_argument(
        "--steps", type=int, default=36, help="minilm-lora: steps per trial (an evaluation every 4)"
    )
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--storage", help=argparse.SUPPRESS)
    parser.add_argument("--events", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.worker:
        worker(options.storage, options.seed, options.trials, options.epochs, options.events, options.problem)
        return
    length = options.steps if options.problem == "minilm-lora" else options.epochs
    wall = run(options.out, options.trials, length, options.processes, options.seed, options.problem)
    study = optuna.load_study(study_name=None, storage=f"sqlite:///{options.out / 'study.db'}")
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    pruned = [t for t in study.trials if t.state == optuna.trial.TrialState.PRUNED]
    best = max((t.value for t in done), default=float("nan"))
    print(json.dumps({"wall_s": round(wall, 2), "best": best, "complete": len(done), "pruned": len(pruned)}))


if __name__ == "__main__":
    main()
