"""The shipped digits study with Ray Tune: a Tuner, the ASHA scheduler at each epoch, TPE through OptunaSearch.

    .venv-bench/bin/python bench/peers/ray_tune.py --out /tmp/ray-digits          # 30 trials, 2 at a time (1 CPU each)
    .venv-bench/bin/python bench/peers/ray_tune.py --out /tmp/r --trials 1 --epochs 1   # start-up cost
    .venv-bench/bin/python bench/peers/ray_tune.py --problem minilm-lora --out /tmp/r-lora --trials 6 --steps 36

Ray Tune's most used setup: `tune.Tuner` over a function trainable that reports once per epoch, `ASHAScheduler`
(grace period 1 epoch, reduction factor 3, 20 epochs max: the Hyperband brackets of the study file, in epochs),
`OptunaSearch` with the study's TPE sampler and define-by-run space, the known-good point first, 2 CPUs with 1 per
trial. The training is bench/peers/common.py's, the same as Optuna alone's. Needs the bench extra (ray[tune]).

`--problem minilm-lora`: bench/peers/minilm_loop.py's LoRA loop (needs peft too) reporting every 4 steps, OptunaSearch with
that study's sampler (TPE, 3 start-up trials), and Ray's counterpart of its median pruner, `MedianStoppingRule` at
each evaluation (grace 1 evaluation, at least 2 other trials to compare with). Ray's rule is not Optuna's: it stops a
trial whose best so far is below the median of the other trials' running means up to that evaluation, and it counts
trials still running or stopped, where Optuna's compares with complete trials' values at that step.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import ray
import torch
from ray import tune
from ray.tune.schedulers import ASHAScheduler, MedianStoppingRule
from ray.tune.search.optuna import OptunaSearch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ENQUEUED, SEED, DigitsRun, Events, digits, sample  # noqa: E402


def trainable(config: dict[str, Any]) -> None:
    torch.set_num_threads(1)
    params = {k: v for k, v in config.items() if not k.startswith("_")}
    run = DigitsRun(params, config["_epochs"], digits.data())
    log = Events(config["_events"], tune.get_context().get_trial_id())
    try:
        for epoch in range(1, config["_epochs"] + 1):
            accuracy = run.epoch()
            log.add(epoch, accuracy)
            tune.report({"accuracy": accuracy, "step": run.step})
    finally:
        log.write()


def lora_trainable(config: dict[str, Any]) -> None:
    # Imported here, not at the top: peft imports transformers (seconds) that the digits problem should not pay for.
    import minilm_loop

    torch.set_num_threads(1)
    params = {k: v for k, v in config.items() if not k.startswith("_")}
    run = minilm_loop.LoraRun(params, config["_epochs"], minilm_loop.data())
    log = Events(config["_events"], tune.get_context().get_trial_id())
    try:
        while not run.done:
            accuracy = run.evaluation()
            log.add(run.epoch, accuracy, step=run.step)
            tune.report({"accuracy": accuracy, "step": run.step})
    finally:
        log.write()


def search_and_scheduler(problem: str, epochs: int, seed: int) -> tuple[Any, Any, Any]:
    """(trainable, OptunaSearch, scheduler) of the problem; `epochs` is a trial's length in its unit."""
    if problem == "minilm-lora":
        import minilm_loop

        search = OptunaSearch(
            space=minilm_loop.sample,
            metric="accuracy",
            mode="max",
            sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=minilm_loop.N_STARTUP_TRIALS),
            points_to_evaluate=[minilm_loop.ENQUEUED],
        )
        rule = MedianStoppingRule(
            time_attr="training_iteration",
            grace_period=1,
            min_samples_required=minilm_loop.PRUNER_STARTUP_TRIALS,
            # Ray's default yields a trial's CPU to a pending one while too few trials can be compared, and a function
            # trainable without checkpoints then starts again from step 0: the trial runs twice. An infinite slice
            # never yields (the first check is `time - (-inf) > min_time_slice`): trials run to their end or stop.
            min_time_slice=math.inf,
        )
        return lora_trainable, search, rule
    search = OptunaSearch(
        space=sample,
        metric="accuracy",
        mode="max",
        sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=8, multivariate=True),
        points_to_evaluate=[ENQUEUED],
    )
    scheduler = ASHAScheduler(
        time_attr="training_iteration", max_t=epochs, grace_period=1, reduction_factor=3
    )
    return trainable, search, scheduler


def run(
    out: Path, trials: int, epochs: int, seed: int, cpus: int, problem: str = "digits"
) -> tuple[float, Any]:
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    function, search, scheduler = search_and_scheduler(problem, epochs, seed)
    tuner = tune.Tuner(
        tune.with_resources(tune.with_parameters(function), {"cpu": 1}),
        param_space={"_epochs": epochs, "_events": str(out / "events.jsonl")},
        tune_config=tune.TuneConfig(
            metric="accuracy",
            mode="max",
            num_samples=trials,
            search_alg=search,
            scheduler=scheduler,
            max_concurrent_trials=cpus,
        ),
        run_config=tune.RunConfig(
            storage_path=str(out / "ray"),
            name={"digits": "digits_mlp"}.get(problem, "minilm_lora"),
            verbose=0,
        ),
    )
    results = tuner.fit()
    wall = time.perf_counter() - started
    ray.shutdown()
    return wall, results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/ray_digits"))
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--problem", choices=["digits", "minilm-lora"], default="digits")
    parser.add_argument("--epochs", type=int, default=20, help="digits: epochs per trial")
    parser.add_argument(
        "--steps", type=int, default=36, help="minilm-lora: steps per trial (an evaluation every 4)"
    )
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--seed", type=int, default=SEED)
    options = parser.parse_args(argv)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    length = options.steps if options.problem == "minilm-lora" else options.epochs
    wall, results = run(options.out, options.trials, length, options.seed, options.cpus, options.problem)
    best = results.get_best_result(metric="accuracy", mode="max", scope="all")
    iterations = [
        r.metrics.get("step" if options.problem == "minilm-lora" else "training_iteration", 0)
        for r in results
        if r.metrics
    ]
    stopped = sum(1 for n in iterations if n < length)
    print(
        json.dumps(
            {
                "wall_s": round(wall, 2),
                "best": best.metrics["accuracy"],
                "trials": len(results),
                "stopped_early": stopped,
            }
        )
    )


if __name__ == "__main__":
    main()
