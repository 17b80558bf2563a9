"""Ray Tune's ASHAScheduler (stop-type) on the digits study with given configurations: the Ray side of bench/pause/asha.py.

    .venv-bench/bin/python bench/pause/ray_asha.py --points points.json --out /tmp/ray-asha     # prints one JSON line

The configurations come from bench/pause/asha.py (the same N points, in the same order, as its other contenders), run by a
`tune.Tuner` as a grid over their indices, 2 at a time with 1 CPU each, each trial reporting
eval accuracy after every epoch; `ASHAScheduler(grace_period=1, reduction_factor=3, max_t=20)` stops trials (Ray's ASHA
cannot pause and resume). The training is bench/peers/common.py's (the digits MLP, cosine schedule with warm-up). Needs
the bench extra (ray[tune]).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import ray
import torch
from ray import tune
from ray.tune.schedulers import ASHAScheduler
from ray.tune.search.basic_variant import BasicVariantGenerator

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.peers.common import DigitsRun, digits  # noqa: E402  (the hand loop the peers share)


def trainable(config: dict[str, Any]) -> None:
    torch.set_num_threads(1)
    params = config["_points"][config["_index"]]
    run = DigitsRun(params, config["_epochs"], digits.data())
    trial = tune.get_context().get_trial_id()
    rows = []
    try:
        for epoch in range(1, config["_epochs"] + 1):
            accuracy = run.epoch()
            rows.append(
                {"trial": trial, "time": time.time(), "epoch": epoch, "step": run.step, "accuracy": accuracy}
            )
            tune.report({"accuracy": accuracy, "step": run.step})
    finally:
        with open(config["_events"], "a", encoding="utf-8") as handle:  # whole lines from several processes
            handle.write("".join(json.dumps(row) + "\n" for row in rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--target", type=float, default=0.97)
    options = parser.parse_args()
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    points = json.loads(options.points.read_text())
    options.out.mkdir(parents=True, exist_ok=True)
    events = options.out / "events.jsonl"
    started = time.time()
    ray.init(num_cpus=options.cpus, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    tuner = tune.Tuner(
        tune.with_resources(trainable, {"cpu": 1}),
        # A grid over the points' indices: one trial per configuration, in the given order.
        param_space={
            "_epochs": options.epochs,
            "_events": str(events),
            "_points": points,
            "_index": tune.grid_search(list(range(len(points)))),
        },
        tune_config=tune.TuneConfig(
            metric="accuracy",
            mode="max",
            search_alg=BasicVariantGenerator(max_concurrent=options.cpus),
            scheduler=ASHAScheduler(
                time_attr="training_iteration", max_t=options.epochs, grace_period=1, reduction_factor=3
            ),
        ),
        run_config=tune.RunConfig(storage_path=str(options.out / "ray"), name="asha_bench", verbose=0),
    )
    tuner.fit()
    wall = time.time() - started
    ray.shutdown()
    rows = [json.loads(line) for line in events.read_text().splitlines()]
    first = min(r["time"] for r in rows) if rows else started
    reached = sorted(r["time"] for r in rows if r["accuracy"] >= options.target)
    last_step: dict[str, int] = {}
    for r in rows:
        last_step[r["trial"]] = max(last_step.get(r["trial"], 0), r["step"])
    print(
        json.dumps(
            {
                "wall_s": round(wall, 2),
                # From the first evaluation back by one epoch would need Ray's trial start; the first row is the
                # earliest time this side can see, so Ray's start-up (ray.init) is in wall_s only.
                "to_target_s": round(reached[0] - started, 2) if reached else None,
                "best": max((r["accuracy"] for r in rows), default=None),
                "trial_steps": sum(last_step.values()),
                "complete": sum(1 for r in rows if r["epoch"] == options.epochs),
                "stopped": len(last_step) - sum(1 for r in rows if r["epoch"] == options.epochs),
                "first_eval_s": round(first - started, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
