"""Ray Tune's ASHA (`ASHAScheduler`, stop-type) on a recorded problem: a peer run in Ray's own environment.

    python3 -m venv .venv-ray && PIP_CONFIG_FILE=/dev/null .venv-ray/bin/pip install "ray[tune]==2.60.0"
    python bench/search/run.py --problem digits --ray-python .venv-ray/bin/python      # adds the "Ray Tune ASHA" row

Ray Tune has no simulated clock of its own (Syne Tune has one: bench/search/peer_synetune.py), but its schedulers are
plain objects that decide from the results they are given: `on_trial_add` when a trial starts, `on_trial_result` at
each report, which returns CONTINUE or STOP. So this file drives Ray's own `ASHAScheduler` (an
`AsyncHyperBandScheduler`) with an event loop of its own, as bench/search/simulate.py drives Optuna's pruners: N
workers, each trial replaying the recorded configuration nearest to the point Ray's default search drew (random search:
`BasicVariantGenerator`, here a seeded draw from the study's space with Ray's domains: uniform, log-uniform, integers,
choices), a report at every recorded evaluation (`time_attr` = the evaluation index, 1..K), stopped when Ray says STOP.
The costs are our simulator's: a new trial pays start_s plus its recorded set-up; a stop costs nothing (as an Optuna
pruner's in simulate.py). Ray's rungs come from `grace_period` (our first rung, in evaluations) and the reduction
factor: 1, 3, 9 evaluations on digits and on the CNN, 1, 3 on MiniLM, the rungs of our paper-style ASHA.

It imports nothing from hpo, optuna or bench (Ray's pins conflict with hpo's); the recording and the mapping of a point
to its nearest recorded configuration are peer_synetune.py's (numpy only), so all three simulators map alike.
Output: one JSON object on stdout, {"ray-asha": [{"seed", "trace", "trials", "resumes", "evaluations", "busy_s"}]}.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_synetune import encode, load_curves, nearest  # noqa: E402

# (trial id, evaluation index 1..K, value) -> True to stop the trial there
Decide = Callable[[int, int, float], bool]


def draw(space: dict[str, dict[str, Any]], rng: np.random.Generator) -> dict[str, Any]:
    """One point as Ray's domains draw it: tune.uniform / loguniform / randint / qrandint / choice. Ray has no
    conditional parameters: every one is drawn, and `nearest` drops those whose condition fails."""
    point: dict[str, Any] = {}
    for name, p in space.items():
        if p["type"] == "categorical":
            point[name] = p["choices"][int(rng.integers(len(p["choices"])))]
        elif p["type"] == "float":
            low, high = float(p["low"]), float(p["high"])
            point[name] = (
                float(math.exp(rng.uniform(math.log(low), math.log(high))))
                if p.get("log")
                else float(rng.uniform(low, high))
            )
        elif p["type"] == "int":
            low, high, step = int(p["low"]), int(p["high"]), int(p.get("step") or 1)
            point[name] = low + step * int(rng.integers((high - low) // step + 1))
        else:
            raise ValueError(f"parameter {name}: type {p['type']} is not mapped to Ray's domains")
    return point


@dataclass
class Run:
    trace: list[list[float]]
    trials: int
    evaluations: int
    busy_s: float


def simulate_stop_type(
    values: np.ndarray,
    segments: np.ndarray,
    pick: Callable[[], int],
    decide: Decide,
    *,
    workers: int,
    budget_s: float,
    start_s: float,
    on_start: Callable[[int], None] = lambda trial: None,
) -> Run:
    """Workers that each run one trial at a time: a new trial (configuration `pick()`) starts at once on a free
    worker, pays start_s and reports at the end of each recorded segment (the set-up is in the first one); `decide`
    stops it, or it ends at the last evaluation. Events at or before the budget are processed."""
    events: list[
        tuple[float, int, int, int, int, int]
    ] = []  # (time, sequence, worker, trial, row, evaluation)
    sequence, trials, busy = 0, 0, 0.0
    trace: list[list[float]] = []

    def start(worker: int, at: float) -> None:
        nonlocal sequence, trials
        row, trial = pick(), trials
        trials += 1
        on_start(trial)
        sequence += 1
        heapq.heappush(events, (at + start_s + segments[row, 0], sequence, worker, trial, row, 0))

    for worker in range(workers):
        start(worker, 0.0)
    began = dict.fromkeys(range(workers), 0.0)
    while events and events[0][0] <= budget_s:
        at, _, worker, trial, row, index = heapq.heappop(events)
        trace.append([at, float(values[row, index])])
        last = index == values.shape[1] - 1
        if decide(trial, index + 1, float(values[row, index])) or last:
            busy += at - began[worker]
            began[worker] = at
            start(worker, at)
        else:
            sequence += 1
            heapq.heappush(events, (at + segments[row, index + 1], sequence, worker, trial, row, index + 1))
    busy += sum(budget_s - since for since in began.values())
    return Run(trace, trials, len(trace), busy)


def ray_asha(options: argparse.Namespace, maximize: bool, seed: int, data: tuple) -> Run:
    from ray.tune.schedulers import ASHAScheduler, TrialScheduler

    params, values, segments = data
    space = json.loads(options.space)
    encoded = np.array([encode(p, space) for p in params])
    rng = np.random.default_rng(seed)
    np.random.seed(seed)  # ASHAScheduler.on_trial_add picks a bracket with np.random (one bracket here)
    scheduler = ASHAScheduler(
        time_attr="evaluation",
        metric="metric",
        mode="max" if maximize else "min",
        max_t=values.shape[1],
        grace_period=options.grace,
        reduction_factor=options.eta,
    )
    trials: dict[int, Any] = {}
    rows: list[int] = []  # each recorded configuration once per run, as the simulator maps (recording.py)

    def pick() -> int:
        rows.append(nearest(encoded, draw(space, rng), space, rows))
        return rows[-1]

    class Trial:  # what the scheduler reads of a trial: its id
        def __init__(self, number: int) -> None:
            self.trial_id = str(number)

    def on_start(number: int) -> None:
        trials[number] = Trial(number)
        scheduler.on_trial_add(None, trials[number])

    def decide(number: int, evaluation: int, value: float) -> bool:
        result = {"evaluation": evaluation, "metric": value}
        return scheduler.on_trial_result(None, trials[number], result) == TrialScheduler.STOP

    return simulate_stop_type(
        values,
        segments,
        pick,
        decide,
        workers=options.workers,
        budget_s=options.budget_s,
        start_s=options.start_s,
        on_start=on_start,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", required=True, help="the recording, bench/search/data/<problem>.json.gz")
    parser.add_argument("--space", required=True, help="the study's sampled_params() as JSON")
    parser.add_argument("--metric", required=True)
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--budget-s", type=float, required=True)
    parser.add_argument("--grace", type=int, default=1, help="the first rung, in evaluations")
    parser.add_argument("--eta", type=int, default=3)
    parser.add_argument("--start-s", type=float, default=0.0)
    parser.add_argument("--seeds", type=int, default=30)
    options = parser.parse_args()
    params, values, segments, maximize = load_curves(options.data, options.metric)
    runs = []
    for seed in range(options.seeds):
        run = ray_asha(options, maximize, seed, (params, values, segments))
        runs.append({"seed": seed, "resumes": 0, **run.__dict__})
    json.dump({"ray-asha": runs}, sys.stdout)


if __name__ == "__main__":
    main()
