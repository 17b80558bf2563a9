"""Ray Tune's PopulationBasedTraining on bench/pause/pbt.py's problem: the Ray side of `bench/pause/pbt.py --ray-python`.

    .venv-bench/bin/python bench/pause/ray_pbt.py --rates rates.json --out /tmp/ray-pbt     # prints one JSON line

The same problem as the study bench/pause/pbt.py writes, trained by hand in a function trainable as a Ray user would: digits
(studies/tasks/digits.py, its fixed split), an MLP of one hidden layer of 64 without dropout, seed 0 before the model is
built, plain SGD with momentum 0.9 at a constant learning rate, batch 16 drawn in the Trainer's order (a permutation
seeded by `seed + epoch`, resumable at any step), gradients clipped at norm 1.0, eval loss on the whole eval split every
`interval` steps. The population starts from the given learning rates (bench/pause/pbt.py passes its own PBT's initial
members, so both populations start alike) and runs `len(rates)` trials of `steps` steps, `cpus` at a time with 1 CPU
each. `PopulationBasedTraining(synch=True)` decides every `interval` steps once all members got there, as our PBT does:
the bottom `quantile` clone a top member's checkpoint (weights, optimizer, step, RNG: what this trainable saves through
ray.tune's Checkpoint API) and explore (learning rate x0.8 / x1.2, or resampled log-uniformly with probability 0.25).
Needs the bench extra (ray[tune]).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import ray
import torch
from ray import tune
from ray.tune.schedulers import PopulationBasedTraining

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from studies.tasks import digits  # noqa: E402

LR_LOW, LR_HIGH = 1e-3, 1.0  # bench/pause/pbt.py's search space
MODEL = {"hidden_size": 64, "num_layers": 1, "dropout": 0.0}
BATCH, MOMENTUM, MAX_GRAD_NORM, SEED = 16, 0.9, 1.0, 0


def batch_indices(step: int, size: int) -> torch.Tensor:
    """The examples of the batch that trains step `step` (0-based), as the Trainer's EpochShuffleSampler orders them:
    epoch e is `randperm(size)` seeded with seed + e, cut into batches of 16 (the last one shorter)."""
    per_epoch = -(-size // BATCH)
    epoch, index = divmod(step, per_epoch)
    order = torch.randperm(size, generator=torch.Generator().manual_seed(SEED + epoch))
    return order[index * BATCH : (index + 1) * BATCH]


def trainable(config: dict[str, Any]) -> None:
    torch.set_num_threads(1)
    train_set, eval_set = digits.data()
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
    model = digits.model_init(MODEL)
    optimizer = torch.optim.SGD(model.parameters(), lr=config["learning_rate"], momentum=MOMENTUM)
    step = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:  # a resume, or an exploit: the clone of a top member's checkpoint
        with checkpoint.as_directory() as folder:
            state = torch.load(Path(folder) / "state.pt", weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        step = state["step"]
        for group in optimizer.param_groups:  # the explored rate replaces the cloned one
            group["lr"] = config["learning_rate"]
    trial = tune.get_context().get_trial_id()
    rows = []
    try:
        while step < config["_steps"]:
            model.train()
            for _ in range(config["_interval"]):
                index = batch_indices(step, len(train_set))
                loss = model(train_set.pixels[index], train_set.labels[index])["loss"]
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
                optimizer.step()
                step += 1
            model.eval()
            with torch.no_grad():
                eval_loss = float(model(eval_set.pixels, eval_set.labels)["loss"])
            rows.append(
                {
                    "trial": trial,
                    "time": time.time(),
                    "step": step,
                    "eval_loss": eval_loss,
                    "learning_rate": config["learning_rate"],
                }
            )
            with tempfile.TemporaryDirectory() as folder:
                state = {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "rng": torch.get_rng_state(),
                    "step": step,
                }
                torch.save(state, Path(folder) / "state.pt")
                tune.report(
                    {"eval_loss": eval_loss, "step": step, "learning_rate": config["learning_rate"]},
                    checkpoint=tune.Checkpoint.from_directory(folder),
                )
    finally:
        with open(config["_events"], "a", encoding="utf-8") as handle:  # whole lines from several processes
            handle.write("".join(json.dumps(row) + "\n" for row in rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rates", type=Path, required=True, help="JSON list: each member's initial learning rate"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=480)
    parser.add_argument("--interval", type=int, default=40)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="seeds the driver's explore decisions")
    options = parser.parse_args()
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    rates = json.loads(options.rates.read_text())
    options.out.mkdir(parents=True, exist_ok=True)
    events = options.out / "events.jsonl"
    # PBT's exploit and explore draw from the driver's `random` (and numpy for a resampled domain).
    random.seed(options.seed)
    np.random.seed(options.seed)
    started = time.time()
    ray.init(num_cpus=options.cpus, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    scheduler = PopulationBasedTraining(
        time_attr="step",
        perturbation_interval=options.interval,
        quantile_fraction=0.25,
        resample_probability=0.25,
        perturbation_factors=(1.2, 0.8),
        hyperparam_mutations={"learning_rate": tune.loguniform(LR_LOW, LR_HIGH)},
        synch=True,
    )
    tuner = tune.Tuner(
        tune.with_resources(trainable, {"cpu": 1}),
        param_space={
            "_steps": options.steps,
            "_interval": options.interval,
            "_events": str(events),
            # One trial per initial rate, in the given order.
            "learning_rate": tune.grid_search(rates),
        },
        tune_config=tune.TuneConfig(metric="eval_loss", mode="min", scheduler=scheduler, reuse_actors=True),
        # The stop criterion ends a member at its last step before PBT could decide there.
        run_config=tune.RunConfig(
            storage_path=str(options.out / "ray"), name="pbt_bench", stop={"step": options.steps}, verbose=0
        ),
    )
    results = tuner.fit()
    wall = time.time() - started
    ray.shutdown()
    rows = [json.loads(line) for line in events.read_text().splitlines()]
    by_trial: dict[str, list[tuple[int, float]]] = {}
    for row in sorted(rows, key=lambda r: r["time"]):
        by_trial.setdefault(row["trial"], []).append((row["step"], row["eval_loss"]))
    finals = [r.metrics["eval_loss"] for r in results if r.metrics and r.metrics.get("step") == options.steps]
    print(
        json.dumps(
            {
                "wall_s": round(wall, 2),
                "best": min(finals, default=None),
                "complete": len(finals),
                "curves": list(by_trial.values()),
                "trial_steps": options.interval * len(rows),  # steps trained, whatever each member cloned
            }
        )
    )


if __name__ == "__main__":
    main()
