"""Syne Tune's schedulers on a recorded problem, in Syne Tune's own simulator: a peer run in its own environment.

    python3 -m venv .venv-syne
    PIP_CONFIG_FILE=/dev/null .venv-syne/bin/pip install --find-links /opt/wheels "syne-tune[basic]==0.13.0"
    .venv-syne/bin/python bench/search/peer_synetune.py --data bench/search/data/digits.json.gz \
        --space '{"learning_rate": {"type": "float", "low": 3e-4, "high": 3e-2, "log": true}, ...}' \
        --metric eval_accuracy --workers 2 --budget-s 48.3 --rungs 1,3,9 --seeds 30 > traces.json

run.py --synetune-python .venv-syne/bin/python calls this once per problem with the arguments filled in from the
problem and its recording, and turns the traces into the same figures as its own methods'. This file runs in Syne
Tune's environment (its pins conflict with hpo's), so it imports nothing from hpo, optuna or bench: the recording is
read straight from its json.gz (`load_curves`) and the search space comes as JSON on the command line (the study's
`sampled_params()`, dumped by run.py).

The blackbox (`RecordedBlackbox`): a Syne Tune `Blackbox` whose fidelity is the evaluation index 1..K, whose
objectives are the metric at that evaluation and the elapsed time (the recorded set-up, plus `--start-s`, plus the
recorded segments up to that evaluation). Its configuration space is the study's real one (log ranges, integer steps,
categoricals), so a model-based searcher (MOBSTER) models the real parameters, and a sampled point is replayed as the
nearest recorded configuration, with the metric and scaling of bench/search/recording.py (`encode`, `nearest`):
numeric parameters scaled to [0, 1] over their range (log space when `log`), categoricals one-hot, a conditional
parameter whose `when:` fails absent (0 plus an "absent" flag); Euclidean distance, ties to the lower index. Syne Tune
has no conditional spaces, so a conditional parameter (digits' dropout) is always sampled and dropped before the
mapping when its condition fails, as hpo's `sample_params` would not have drawn it.

The simulation: `UserBlackboxBackend` with `SimulatorCallback` (simulated time, no sleeping), `n_workers` the
problem's workers, stopped at `max_wallclock_time` = the budget. Syne Tune has no pause or resume cost as such; its
cost model is the recorded elapsed time (a resumed trial restarts from its checkpoint: the backend subtracts the
elapsed time up to the paused level, so a resume pays no set-up) and the `SimulatorConfig` delays, which carry our
simulator's costs here: `delay_start` (every start and resume) = --resume-s, with a start's --start-s minus that
added to its elapsed time, so a start costs set-up + start_s and a resume resume_s, as in simulate.py;
`delay_complete_after_stop` = --pause-s (a pause, and also a stop, which our simulator charges nothing); results and
completions arrive at once (delays 0; Syne Tune's defaults are 0.05 s each). Two of Syne Tune's defaults are changed
so that the clock moves by the recording only: the tuner's poll (`tuner_sleep_time`, 5 s by default, a quantum of
simulated time between result fetches) is --poll-s (0.01 s), and the real time spent outside the backend (scheduler
decisions, GP fits, the tuner loop), which Syne Tune adds to the simulated clock, is not added unless
--decision-time-counts (our simulator charges no decision time either; on a loaded machine it is noise).

Output: one JSON object on stdout (or --out), {scheduler: [{"seed", "trace": [[time, value], ...], "trials", "resumes",
"evaluations", "busy_s"}, ...]}; `trace` holds every reported evaluation (simulated tuner time, metric) in order.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import logging
import math
import os
import sys
import tempfile
import time
from typing import Any

import numpy as np

SCHEDULERS = ("promotion-asha", "stop-asha", "mobster", "hypertune", "dyhpo")
RESOURCE = "evaluation"  # the fidelity: index of the evaluation, 1..K
MAX_RESOURCE = (
    "max_evaluations"  # config key for the maximum fidelity (promotion-type schedulers set it per run)
)
METRIC = "metric"
ELAPSED = "elapsed_time"


def load_curves(path: str, metric: str) -> tuple[list[dict[str, Any]], np.ndarray, np.ndarray, bool]:
    """The recording as bench/search/record.py writes it: each configuration's params, its set-up seconds, the
    seconds of each segment (to the end of each evaluation) and the metric at each evaluation. Returns the params,
    the values (configurations x evaluations), the segment seconds (same shape), and whether the metric is
    maximised. The set-up is added to the first segment's time by the caller."""
    with gzip.open(path, "rt", encoding="utf-8") as stored:
        data = json.load(stored)
    configurations = data["configurations"]
    params = [c["params"] for c in configurations]
    values = np.array([c[metric] for c in configurations], dtype=float)
    segments = np.array([c["segment_s"] for c in configurations], dtype=float)
    setup = np.array([c["setup_s"] for c in configurations], dtype=float)
    segments[:, 0] += setup
    return params, values, segments, data["direction"] == "maximize"


def condition_holds(when: dict[str, Any] | None, params: dict[str, Any]) -> bool:
    """hpo.trial.space._condition_holds: every named parameter was chosen and has that value (a list: any of)."""
    for other, expected in (when or {}).items():
        if other not in params:
            return False
        allowed = expected if isinstance(expected, list) else [expected]
        if params[other] not in allowed:
            return False
    return True


def encode(params: dict[str, Any], space: dict[str, dict[str, Any]]) -> list[float]:
    """bench.search.recording.encode, on the space's JSON form."""
    vector: list[float] = []
    for name, param in space.items():
        present = name in params
        if param["type"] == "categorical":
            vector += [1.0 if present and params[name] == c else 0.0 for c in param["choices"]]
        else:
            low, high = float(param["low"]), float(param["high"])
            value = float(params.get(name, param["low"]))
            if param.get("log"):
                low, high, value = math.log(low), math.log(high), math.log(value)
            vector.append((value - low) / (high - low) if present and high > low else 0.0)
        if param.get("when"):
            vector.append(0.0 if present else 1.0)
    return vector


def nearest(
    encoded: np.ndarray,
    configuration: dict[str, Any],
    space: dict[str, dict[str, Any]],
    taken: list[int] | tuple[int, ...] = (),
) -> int:
    """The recorded configuration (row of `encoded`) nearest to a sampled point, among those not in `taken` while any
    is left, as bench.search.recording's `Recording.nearest`; a conditional parameter whose `when:` fails is dropped
    first (hpo would not draw it)."""
    chosen: dict[str, Any] = {}
    for name, param in space.items():  # the file's order; a condition names an earlier parameter
        if name in configuration and condition_holds(param.get("when"), chosen):
            chosen[name] = configuration[name]
    distances = np.linalg.norm(encoded - np.array(encode(chosen, space)), axis=1)
    rows = sorted(
        set(taken)
    )  # bench.search.recording.nearest_untaken, copied: that package is not importable here
    if rows and len(rows) < len(distances):
        distances[rows] = np.inf
    return int(np.argmin(distances))  # argmin: the first of equal distances


def config_space(space: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The study's search space in Syne Tune's domains (no conditions: see the module's docstring)."""
    from syne_tune.config_space import choice, finrange, lograndint, loguniform, randint, uniform

    domains: dict[str, Any] = {}
    for name, p in space.items():
        if p["type"] == "categorical":
            domains[name] = choice(list(p["choices"]))
        elif p["type"] == "float":
            domains[name] = (loguniform if p.get("log") else uniform)(float(p["low"]), float(p["high"]))
        elif p["type"] == "int":
            low, high, step = int(p["low"]), int(p["high"]), p.get("step")
            if step and step != 1:
                domains[name] = finrange(low, high, (high - low) // int(step) + 1, cast_int=True)
            else:
                domains[name] = (lograndint if p.get("log") else randint)(low, high)  # both ends included
        else:
            raise ValueError(f"parameter {name}: type {p['type']} is not mapped to Syne Tune")
    return domains


def make_blackbox(
    space: dict[str, dict[str, Any]], params: list[dict[str, Any]], values: np.ndarray, elapsed: np.ndarray
) -> Any:
    from syne_tune.blackbox_repository.blackbox import Blackbox
    from syne_tune.config_space import randint

    class RecordedBlackbox(Blackbox):
        """Every recorded configuration's curve; a sampled point answers with the nearest one's (see the docstring)."""

        def __init__(self) -> None:
            super().__init__(
                configuration_space=config_space(space),
                fidelity_space={RESOURCE: randint(1, values.shape[1])},
                objectives_names=[METRIC, ELAPSED],
            )
            self.encoded = np.array([encode(p, space) for p in params])
            self.replayed: list[int] = []  # the recorded configuration of each query, in order
            self.rows: dict[
                str, int
            ] = {}  # a configuration's row, fixed at its first query (a resume asks again)

        def nearest(self, configuration: dict[str, Any]) -> int:
            """Each recorded configuration once per run, as the simulator maps (bench/search/recording.py)."""
            key = json.dumps(configuration, sort_keys=True, default=str)
            if key not in self.rows:
                self.rows[key] = nearest(self.encoded, configuration, space, list(self.rows.values()))
            return self.rows[key]

        def _objective_function(
            self, configuration: dict[str, Any], fidelity: dict | None = None, seed: int | None = None
        ) -> Any:
            row = self.nearest(configuration)
            self.replayed.append(row)
            table = np.stack([values[row], elapsed[row]], axis=1)  # (K, 2)
            if fidelity is None:
                return table
            k = int(fidelity[RESOURCE])
            return {METRIC: table[k - 1, 0], ELAPSED: table[k - 1, 1]}

        @property
        def fidelity_values(self) -> np.ndarray:
            return np.arange(1, values.shape[1] + 1)

    return RecordedBlackbox()


def make_scheduler(
    name: str, domains: dict[str, Any], options: argparse.Namespace, mode: str, seed: int
) -> Any:
    from syne_tune.optimizer.baselines import MOBSTER, DyHPO, HyperTune
    from syne_tune.optimizer.schedulers import HyperbandScheduler

    rungs = [int(r) for r in options.rungs.split(",")]
    common = dict(
        metric=METRIC,
        mode=mode,
        resource_attr=RESOURCE,
        max_resource_attr=MAX_RESOURCE,
        rung_levels=rungs,  # promotion quantile at rung j: r_j / r_{j+1} (the last: r_last / K)
        random_seed=seed,
    )
    if options.first == "none":
        common["points_to_evaluate"] = []  # Syne Tune's default: the space's midpoint first, on every seed
    if name == "promotion-asha":
        return HyperbandScheduler(domains, searcher="random", type="promotion", **common)
    if name == "stop-asha":
        return HyperbandScheduler(domains, searcher="random", type="stopping", **common)
    if name == "mobster":
        return MOBSTER(domains, type="promotion", **common)
    if name == "hypertune":
        return HyperTune(domains, type="promotion", brackets=len(rungs) + 1, **common)
    if name == "dyhpo":  # its own rungs: every evaluation (linearly spaced, as DyHPO is run)
        return DyHPO(domains, **{k: v for k, v in common.items() if k != "rung_levels"})
    raise ValueError(name)


def run_one(
    name: str, seed: int, options: argparse.Namespace, blackbox: Any, maximize: bool
) -> dict[str, Any]:
    from syne_tune import StoppingCriterion, Tuner
    from syne_tune.backend.simulator_backend.simulator_backend import SimulatorConfig
    from syne_tune.backend.simulator_backend.simulator_callback import SimulatorCallback
    from syne_tune.blackbox_repository import UserBlackboxBackend

    class Backend(UserBlackboxBackend):
        """Counts resumes (the scheduler's promotions of paused trials); unless --decision-time-counts, the clock
        moves by simulated costs only (Syne Tune by default also adds the real time spent outside the backend:
        scheduler decisions, model fits, the tuner loop, which on a loaded machine is noise)."""

        resumes = 0

        def _resume_trial(self, trial_id: int) -> None:
            self.resumes += 1
            super()._resume_trial(trial_id)

        def _advance_by_outside_time(self) -> None:
            if options.decision_time_counts:
                super()._advance_by_outside_time()

    # Our simulator's costs in Syne Tune's delays: a start or a resume waits `delay_start` (= resume_s; a start's
    # extra start_s - resume_s is in its elapsed time, with the set-up); a pause or a stop takes `delay_stop` +
    # `delay_complete_after_stop` (= pause_s) before the worker is free; results and completions arrive at once.
    delays = SimulatorConfig(
        delay_on_trial_result=0.0,
        delay_complete_after_final_report=0.0,
        delay_complete_after_stop=options.pause_s,
        delay_start=options.resume_s,
        delay_stop=0.0,
    )
    backend = Backend(
        blackbox=blackbox,
        elapsed_time_attr=ELAPSED,
        max_resource_attr=MAX_RESOURCE,
        seed=0,
        simulator_config=delays,
        tuner_sleep_time=options.poll_s,
    )
    domains = dict(blackbox.configuration_space, **{MAX_RESOURCE: int(max(blackbox.fidelity_values))})
    scheduler = make_scheduler(name, domains, options, "max" if maximize else "min", seed)
    callback = SimulatorCallback()
    tuner = Tuner(
        trial_backend=backend,
        scheduler=scheduler,
        stop_criterion=StoppingCriterion(max_wallclock_time=options.budget_s),
        n_workers=options.workers,
        sleep_time=0,
        callbacks=[callback],
        results_update_interval=1e9,
        print_update_interval=1e9,
        tuner_name=f"{name}-{seed}",
        save_tuner=False,
    )
    tuner.run()
    frame = callback.dataframe()
    if len(frame):  # results come in the order the tuner fetched them: put them in simulated-time order
        frame = frame.sort_values("st_tuner_time", kind="stable")
    trace = [[float(t), float(v)] for t, v in zip(frame["st_tuner_time"], frame[METRIC], strict=True)]
    reported = [[int(i), int(r)] for i, r in zip(frame["trial_id"], frame[RESOURCE], strict=True)]
    # Worker-seconds of the work reported by the budget (work in flight at the budget is left out): a trial's
    # elapsed time restarts at each resume (the backend counts from the resume), so a run of it ends where the next
    # report's elapsed time is smaller; each run also waited delay_start (resume_s), and each that did not train to
    # the end paid the pause or stop (pause_s).
    busy = 0.0
    last = int(max(blackbox.fidelity_values))
    for _, rows in frame[frame["st_tuner_time"] <= options.budget_s].groupby("trial_id"):
        e = rows[ELAPSED].to_numpy(dtype=float)
        ends = np.append(e[1:] < e[:-1], True)
        stopped = int((rows[RESOURCE].to_numpy()[ends] < last).sum())
        busy += float(e[ends].sum()) + int(ends.sum()) * options.resume_s + stopped * options.pause_s
    return {
        "seed": seed,
        "trace": trace,
        "trials": int(frame["trial_id"].nunique()) if len(frame) else 0,
        "resumes": backend.resumes,
        "evaluations": len(frame),
        "reported": reported,  # (trial id, evaluation index) of each trace entry
        "busy_s": busy,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", required=True, help="the recording, bench/search/data/<problem>.json.gz")
    parser.add_argument(
        "--space", required=True, help="the study's sampled parameters as JSON (ParamSpec dumps)"
    )
    parser.add_argument("--metric", required=True, help="the recorded metric key, e.g. eval_accuracy")
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--budget-s", type=float, required=True, help="max_wallclock_time, simulated seconds")
    parser.add_argument("--rungs", required=True, help="rung levels in evaluations, e.g. 1,3,9")
    parser.add_argument(
        "--start-s", type=float, default=0.2, help="a start's cost beyond the recorded set-up"
    )
    parser.add_argument("--pause-s", type=float, default=0.25, help="a pause's (and a stop's) cost")
    parser.add_argument(
        "--resume-s", type=float, default=0.8, help="a resume's cost (Syne Tune: also every start's)"
    )
    parser.add_argument(
        "--poll-s",
        type=float,
        default=0.01,
        help="simulated seconds per tuner sleep (Syne Tune's default: 5)",
    )
    parser.add_argument(
        "--first",
        choices=["midpoint", "none"],
        default="midpoint",
        help="Syne Tune's first configuration: the midpoint of the space (its default) or none (all sampled)",
    )
    parser.add_argument(
        "--decision-time-counts",
        action="store_true",
        help="as Syne Tune by default: real time outside the backend advances the simulated clock",
    )
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--schedulers", default="promotion-asha,stop-asha,mobster")
    parser.add_argument("--out", help="write the JSON here (default: stdout)")
    options = parser.parse_args()
    logging.disable(logging.WARNING)  # Syne Tune logs every trial at INFO and warns about unused extras

    space = json.loads(options.space)
    params, values, segments, maximize = load_curves(options.data, options.metric)
    segments[:, 0] += options.start_s - options.resume_s  # the start's delay_start is resume_s
    elapsed = np.cumsum(segments, axis=1)
    out: dict[str, Any] = {}
    # Syne Tune prints (import notices, the tuner's summaries) on stdout: keep stdout for the JSON
    with tempfile.TemporaryDirectory() as workdir, contextlib.redirect_stdout(sys.stderr):
        os.environ["SYNETUNE_FOLDER"] = workdir  # the tuner's files go here and are thrown away
        for name in options.schedulers.split(","):
            if name not in SCHEDULERS:
                raise SystemExit(f"unknown scheduler {name}; one of {', '.join(SCHEDULERS)}")
            started = time.perf_counter()
            out[name] = [
                run_one(name, seed, options, make_blackbox(space, params, values, elapsed), maximize)
                for seed in range(options.seeds)
            ]
            print(f"{name}: {options.seeds} seeds in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    if options.out:
        with open(options.out, "w", encoding="utf-8") as file:
            json.dump(out, file)
    else:
        json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
