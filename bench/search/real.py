"""Methods run for real (`hpo run`, not simulated) on a recorded problem's study, a few seeds each, judged as the
simulator judges them, with the simulated figures of the same method and seed beside them.

    python bench/search/real.py --problem digits --methods random,tpe,mftpe+asha-underfilled --seeds 3   # ~5 min
    python bench/search/real.py --problem minilm-lora --seeds 3                                           # ~25 min

Each run is the problem's study file with the method's sections (sampler and its seed, pruner or ASHA scheduler, as
`bench/search/methods.py` builds them for the simulator), the problem's training overrides, its workers, no
`enqueue:` point (the simulator starts from none either), and a time limit: the problem's wall budget
(`simulate.budget_of`) at this machine's speed factor (`speed.py`) with a margin, plus what `hpo run` takes to start
its first trial. The run is then put on the recording's clock by its own pace (`pace.py`: its trials' seconds over
the recorded cost of the same work), and what falls past the budget is not counted. Seeds and methods are interleaved (seed 0
of every method, then seed 1, ...) so that the machine's load falls on all of them alike. Time counts from the first
trial's start, as the simulated clock does (hpo's own start-up is issue 26's gap, not the search's); every evaluation
of every trial counts toward the best-so-far, from the experiment store's timestamps. Run it on a quiet machine: the
recording's segment times are a quiet machine's, and a loaded one stretches every real figure.

What it must show (issue 23): the direction of the simulated verdict (which method reaches the targets first)
holds for real. Three seeds cannot rank methods whose spreads overlap; the simulator's 30 can. Issue 36: real medians
agree with the simulator within its stated error, which is the spread a median of that many seeds has among
`--sim-seeds` simulated ones (bench/search/agreement.py; the table it prints last). The same 10 seeds simulated are
one draw of that spread, often far from its middle: on synth-optim their median to q95 was 3.8 s, 400 seeds' 6.5 s.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna
import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from bench.pause.asha import evaluations  # noqa: E402
from bench.search import agreement  # noqa: E402
from bench.search.crosscheck import study_section  # noqa: E402
from bench.search.figures import QUANTILES, figures_row  # noqa: E402
from bench.search.methods import HPO_METHOD, Method, methods_for  # noqa: E402
from bench.search.pace import run_pace  # noqa: E402
from bench.search.problems import PROBLEMS, Problem  # noqa: E402
from bench.search.recording import Recording, load  # noqa: E402
from bench.search.simulate import Costs, Outcome, budget_of, simulate  # noqa: E402
from bench.search.speed import speed_factor  # noqa: E402
from bench.search.suite import methods_of  # noqa: E402
from hpo.spec import load_study_spec  # noqa: E402
from hpo.storage.study_db import load_existing_study  # noqa: E402
from hpo.study import run_study  # noqa: E402

# A run's time limit is the budget at the speed factor times this: its own pace may be slower (real.py judges by it).
PACE_MARGIN = 1.3
START_ALLOWANCE_S = (
    8.0  # hpo run's imports, dry run and workers' start, before the first trial: not in the budget
)
DEFAULT_METHODS = f"random,tpe,tpe+sh,{HPO_METHOD}"


def sampler_section(method: Method, problem: Problem, seed: int) -> dict[str, Any]:
    """The sampler `Method.sampler_for` builds in the simulator, as a study file says it (hpo run seeds the workers
    apart from it the same way)."""
    if method.sampler == "random":
        return {"type": "random", "seed": seed}
    section = yaml.safe_load(problem.study.read_text())["study"].get("sampler", {"type": "tpe"})
    return {**section, "seed": seed, **method.sampler_choices}


def write_study(problem: Problem, method: Method, seed: int, folder: Path, budget_s: float) -> Path:
    data = yaml.safe_load(problem.study.read_text())
    study = {
        k: v for k, v in data["study"].items() if k not in ("pruner", "scheduler", "enqueue", "n_trials")
    }
    study.update(
        name=f"real_{re.sub(r'[^A-Za-z0-9]+', '_', method.name).strip('_')}_{seed}",
        output_dir=str(folder / "study"),
        timeout=round(float(budget_s) + START_ALLOWANCE_S, 1),
        sampler=sampler_section(method, problem, seed),
        **study_section(method, problem),
    )
    data["study"] = study
    data["training"] = {**data.get("training", {}), **problem.training}
    data["resources"] = {**data.get("resources", {}), "workers": problem.workers}
    data["tracking"] = {"store": True}  # every evaluation with its time
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def real_outcome(path: Path) -> tuple[Outcome, list[optuna.trial.FrozenTrial], float]:
    """Run the study; its evaluations as the simulator's Outcome, (seconds since the first trial started, value),
    with every trial's start in `started_at`; its trials, and the first start (epoch seconds)."""
    run_study(path, dry_run=False)
    spec = load_study_spec(path)
    trials = load_existing_study(spec).get_trials(deepcopy=False)
    starts = {t.number: t.datetime_start.timestamp() for t in trials if t.datetime_start}
    first = min(starts.values())
    trace = [(at - first, value) for at, value in sorted(evaluations(spec))]
    outcome = Outcome(trace=trace)
    outcome.started = sorted(at - first for at in starts.values())  # seconds, this machine's
    return outcome, trials, first


def on_recording_clock(outcome: Outcome, scale: float, budget_s: float) -> Outcome:
    """The run on the recording's clock (its seconds divided by `scale`): evaluations and trials started within the
    budget (the run's time limit has `hpo run`'s start-up allowance and a margin on top, which a quick start or a
    fast pace spends on work the budget does not count)."""
    trace = [(at / scale, value) for at, value in outcome.trace if at / scale <= budget_s]
    scaled = Outcome(trace=trace)
    scaled.started = [at / scale for at in outcome.started if at / scale <= budget_s]
    return scaled


def one_seed(
    recording: Recording,
    method: Method,
    seed: int,
    budget_s: float,
    factor: float,
    costs: Costs,
    keep: Path | None = None,
    by_pace: bool = True,
) -> tuple[dict[str, float], dict[str, float]]:
    """One real run and its simulation; `keep`: a folder to leave the run's study in (else a temporary one).
    `by_pace`: the run is put on the recording's clock by its own pace (bench/search/pace.py), else by `factor`."""
    if keep is not None:
        folder = keep / f"{re.sub(r'[^A-Za-z0-9]+', '_', method.name).strip('_')}-{seed}"
        shutil.rmtree(folder, ignore_errors=True)  # a run of the same method and seed before: replaced
    else:
        folder = Path(tempfile.mkdtemp(prefix="search-real-"))
    # Long enough for the budget's work at a pace up to PACE_MARGIN times slower than the factor says.
    limit_s = budget_s * factor * (PACE_MARGIN if by_pace else 1.0)
    try:
        real, trials, _ = real_outcome(write_study(recording.problem, method, seed, folder, limit_s))
    finally:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    pace = run_pace(recording, trials, costs.start_s)
    scale = pace if by_pace and pace else factor
    real = on_recording_clock(real, scale, budget_s)
    simulated = simulate(recording, method, seed, budget_s=budget_s, costs=costs)
    real_row = figures_row(real, recording, budget_s, len(real.started))
    real_row |= {"factor": round(factor, 4), "pace": round(pace, 4) if pace else None}
    return real_row, figures_row(simulated, recording, budget_s, len(simulated.trials))


def median(values: list[float]) -> float:
    return statistics.median_low(
        values
    )  # inf (not reached) sorts last: a finite median needs most seeds to reach


def show(value: float, key: str) -> str:
    if math.isinf(value):
        return "-"
    return f"{value:.4f}" if key.startswith("best") else f"{value:.1f}"


def report(rows: dict[str, list[tuple[dict, dict]]], recording: Recording) -> list[str]:
    keys = [f"to_q{round(q * 100)}_s" for q in QUANTILES] + ["best_at_0.5", "best_at_1", "trials"]
    targets = ", ".join(f"q{round(q * 100)} {recording.target(q):.4f}" for q in QUANTILES)
    lines = [
        f"targets: {targets}; each cell: real (simulated), median over seeds; '-': not reached on most seeds"
    ]
    lines.append("| method | " + " | ".join(keys) + " |")
    lines.append("|" + "---|" * (len(keys) + 1))
    for name, pairs in rows.items():
        cells = []
        for key in keys:
            real = median([r[key] for r, _ in pairs])
            simulated = median([s[key] for _, s in pairs])
            cells.append(f"{show(real, key)} ({show(simulated, key)})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--problem", default="digits", choices=sorted(PROBLEMS))
    parser.add_argument(
        "--methods", default=DEFAULT_METHODS, help="comma-separated names (bench/search/methods.py)"
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1"
    )
    parser.add_argument("--json", type=Path, help="every run's figures, real and simulated")
    parser.add_argument(
        "--sim-seeds",
        type=int,
        default=400,
        help="then each real median against the simulator's interval for as many seeds, from this many simulated "
        "(bench/search/agreement.py); 0: not",
    )
    parser.add_argument(
        "--scale",
        choices=("pace", "factor"),
        default="pace",
        help="put each run on the recording's clock by its own pace (default) or by the speed factor measured "
        "before the runs (real.py before 2026-12-04); the time limit is 1.3x longer with pace",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="leave each run's study (storage, experiment store, logs) in KEEP/<method>-<seed>",
    )
    parser.add_argument(
        "--start-s",
        type=float,
        help="the simulated side's per-trial start cost (default: the problem's; crosscheck.py implies one)",
    )
    options = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    recording = load(PROBLEMS[options.problem])
    known = {m.name: m for m in methods_for(recording.problem)} | methods_of(
        options.problem
    )  # suite names too
    names = options.methods.split(",")
    if unknown := [name for name in names if name not in known]:
        parser.error(f"--methods: unknown {unknown}; known: {', '.join(sorted(known))}")
    methods = [known[name] for name in names]
    if simulated := [m.name for m in methods if m.simulated_only]:
        parser.error(
            f"--methods: {simulated} use bench/search's own pruner or sampler and run in the simulator only"
        )
    budget_s = budget_of(recording)
    factor = speed_factor(recording)
    costs = Costs.of(recording)
    if options.start_s is not None:
        costs = replace(costs, start_s=options.start_s)
    by = (
        f"by each run's own pace (its time limit {PACE_MARGIN}x the budget here)"
        if options.scale == "pace"
        else "by the speed factor"
    )
    print(
        f"{options.problem}: budget {budget_s:.1f} s of the recording's time, {budget_s * factor:.1f} s here by "
        f"the speed factor (this machine takes {factor:.2f}x the recorded time), {recording.problem.workers} "
        f"workers, seeds {options.first_seed}-{options.first_seed + options.seeds - 1}; real times below are in "
        f"the recording's seconds, {by}; simulated with a start cost of {costs.start_s} s a trial"
    )
    rows: dict[str, list[tuple[dict, dict]]] = {m.name: [] for m in methods}
    started = time.time()
    for seed in range(options.first_seed, options.first_seed + options.seeds):
        for method in methods:
            real, simulated = one_seed(
                recording, method, seed, budget_s, factor, costs, options.keep, options.scale == "pace"
            )
            rows[method.name].append((real, simulated))
            print(f"seed {seed} {method.name}: real {real}; simulated {simulated}", flush=True)
    print("\n".join(report(rows, recording)))
    print(f"{time.time() - started:.0f} s in all")
    if options.json:
        options.json.write_text(json.dumps(rows, default=str))
    if options.sim_seeds:
        real = {name: [r for r, _ in pairs] for name, pairs in rows.items()}
        simulated = agreement.simulate_seeds(
            options.problem, methods, options.sim_seeds, costs.start_s, jobs=2
        )
        print(f"against {options.sim_seeds} simulated seeds (bench/search/agreement.py):")
        print("\n".join(agreement.table([real], simulated)))


if __name__ == "__main__":
    main()
