"""The shipped digits study with Ray Tune: a Tuner, the ASHA scheduler at each epoch, TPE through OptunaSearch.

    .venv-bench/bin/python bench/peer_ray.py --out /tmp/ray-digits          # 30 trials, 2 at a time (1 CPU each)
    .venv-bench/bin/python bench/peer_ray.py --out /tmp/r --trials 1 --epochs 1   # start-up cost

Ray Tune's most used setup: `tune.Tuner` over a function trainable that reports once per epoch, `ASHAScheduler`
(grace period 1 epoch, reduction factor 3, 20 epochs max: the Hyperband brackets of the study file, in epochs),
`OptunaSearch` with the study's TPE sampler and define-by-run space, the known-good point first, 2 CPUs with 1 per
trial. The training is bench/peer_common.py's, the same as Optuna alone's. Needs the bench extra (ray[tune]).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import ray
import torch
from ray import tune
from ray.tune.schedulers import ASHAScheduler
from ray.tune.search.optuna import OptunaSearch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_common import ENQUEUED, SEED, DigitsRun, Events, digits, sample  # noqa: E402


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


def run(out: Path, trials: int, epochs: int, seed: int, cpus: int) -> tuple[float, Any]:
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
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
    tuner = tune.Tuner(
        tune.with_resources(tune.with_parameters(trainable), {"cpu": 1}),
        param_space={"_epochs": epochs, "_events": str(out / "events.jsonl")},
        tune_config=tune.TuneConfig(
            metric="accuracy",
            mode="max",
            num_samples=trials,
            search_alg=search,
            scheduler=scheduler,
            max_concurrent_trials=cpus,
        ),
        run_config=tune.RunConfig(storage_path=str(out / "ray"), name="digits_mlp", verbose=0),
    )
    results = tuner.fit()
    wall = time.perf_counter() - started
    ray.shutdown()
    return wall, results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/ray_digits"))
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--seed", type=int, default=SEED)
    options = parser.parse_args(argv)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    wall, results = run(options.out, options.trials, options.epochs, options.seed, options.cpus)
    best = results.get_best_result(metric="accuracy", mode="max", scope="all")
    iterations = [r.metrics.get("training_iteration", 0) for r in results if r.metrics]
    stopped = sum(1 for n in iterations if n < options.epochs)
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
