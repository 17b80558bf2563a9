"""Every method on many seeds of a recorded problem: the table that tells them apart.

    python bench/search/run.py --problem digits --seeds 30     # about a minute on one core
    python bench/search/run.py --seeds 30                       # every recorded problem (--problem all)
    python bench/search/run.py --quick                          # every problem, every method, 3 seeds: under a minute
    python bench/search/run.py --n-trials 30                    # the study's n_trials instead of a time limit

By default each run is `hpo run` with a time limit of the problem's wall budget (the study's n_trials trained to the
end on its workers, at the median recorded trial cost) and no n_trials: early stopping buys more configurations.
`--n-trials N` runs N configurations instead and ends when they are done (ASHA then ends hopeless trials at once).
Targets are the 90th, 95th and 99th percentiles of the recorded configurations' final scores. The last lines give
hpo's default (HPO_METHOD in methods.py) against the best peer (PEERS) on each figure. The JSON (every seed's figures) goes to --json.

    python bench/search/run.py --synetune-python .venv-syne/bin/python   # adds Syne Tune's schedulers as peers
    python bench/search/run.py --ray-python .venv-ray/bin/python         # adds Ray Tune's ASHA (bench/search/peer_ray.py)

`--synetune-python` runs bench/search/peer_synetune.py in that interpreter (Syne Tune's own environment) for each
problem: Syne Tune's promotion and stop-type ASHA and MOBSTER in Syne Tune's simulator on the same recording, budget,
workers, rungs and costs; their traces are judged with the same `run_figures` and they join the peers.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import optuna

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from bench.search.figures import FRACTIONS, QUANTILES, RunFigures, Spread, run_figures, summarise  # noqa: E402
from bench.search.methods import HPO_METHOD, PEERS, Method, methods_for  # noqa: E402
from bench.search.problems import PROBLEMS, RECORDED  # noqa: E402
from bench.search.recording import Recording, load  # noqa: E402
from bench.search.simulate import Costs, budget_of, simulate  # noqa: E402

# peer_synetune.py's schedulers and their rows in the table; the model-based ones are slow (a GP fit per decision)
SYNETUNE = {
    "promotion-asha": "Syne Tune promotion ASHA",
    "stop-asha": "Syne Tune stop ASHA",
    "mobster": "Syne Tune MOBSTER",
    "hypertune": "Syne Tune Hyper-Tune",
}
SYNETUNE_MODEL_BASED = ("mobster", "hypertune")


def run_method(
    recording: Recording, method: Method, seeds: int, budget_s: float, n_trials: int | None, costs: Costs
) -> list[RunFigures]:
    targets = {q: recording.target(q) for q in QUANTILES}
    runs = []
    for seed in range(seeds):
        outcome = simulate(recording, method, seed, budget_s=budget_s, n_trials=n_trials, costs=costs)
        runs.append(run_figures(outcome, targets, budget_s, recording.maximize, recording.regret_scale()))
    return runs


def cell(spread: Spread, digits: int, show_reached: bool = False) -> str:
    if math.isnan(spread.median):
        return "-"
    if math.isinf(spread.median):
        text = "not reached"
    else:
        high = "inf" if math.isinf(spread.high) else f"{spread.high:.{digits}f}"
        text = f"{spread.median:.{digits}f} [{spread.low:.{digits}f}, {high}]"
    return f"{text} ({spread.reached}/{spread.runs})" if show_reached else text


def table(summaries: dict[str, dict[str, Spread]]) -> str:
    columns = [f"to_q{round(q * 100)}_s" for q in QUANTILES] + [f"best_at_{f:g}" for f in FRACTIONS]
    columns += ["compute_s", "trials", "resumes"]
    header = ["method"] + [c.replace("_at_", "@").replace("to_q", "to q") for c in columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, figures in summaries.items():
        row = [name]
        for c in columns:
            digits = 4 if c.startswith("best") else (1 if c.endswith("_s") else 0)
            row.append(cell(figures[c], digits, show_reached=c.startswith("to_q")))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def against_best_other(summaries: dict[str, dict[str, Spread]], peers: tuple[str, ...] = PEERS) -> list[str]:
    """hpo's default against the best peer on each figure (by median): time ratios, value differences."""
    ours, others = summaries[HPO_METHOD], {k: v for k, v in summaries.items() if k in peers}
    lines = []
    for q in QUANTILES:
        key = f"to_q{round(q * 100)}_s"
        name, best = min(others.items(), key=lambda item: item[1][key].median)
        if not math.isfinite(best[key].median):
            text = "no method reached it on most seeds"
        elif not math.isfinite(ours[key].median):
            text = f"{HPO_METHOD} did not reach it on most seeds, {name} in {best[key].median:.1f} s"
        else:
            text = f"{ours[key].median / best[key].median:.2f}x"
        lines.append(f"{HPO_METHOD} / best peer ({name}), time to q{round(q * 100)}: {text}")
    for f in FRACTIONS:
        key = f"best_at_{f:g}"
        name, best = max(others.items(), key=lambda item: item[1][key].median)
        lines.append(
            f"{HPO_METHOD} - best peer ({name}), best at {f:g} of the budget: {ours[key].median - best[key].median:+.4f}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--problem", default="all", choices=["all", *sorted(PROBLEMS)])
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="3 seeds")
    parser.add_argument("--n-trials", type=int, help="configurations per run instead of a time limit")
    parser.add_argument("--budget-x", type=float, default=1.0, help="the wall budget times this")
    parser.add_argument("--only", help="comma-separated method names")
    parser.add_argument("--start-s", type=float, help="per-trial start cost (default: the problem's)")
    parser.add_argument("--pause-s", type=float, help="cost of a pause (default: the problem's)")
    parser.add_argument("--resume-s", type=float, help="cost of a resume (default: the problem's)")
    parser.add_argument(
        "--synetune-python", type=Path, help="Syne Tune's interpreter: add its schedulers as peers"
    )
    parser.add_argument(
        "--synetune-schedulers",
        default="promotion-asha,stop-asha,mobster",
        help=f"comma-separated, of {', '.join(SYNETUNE)}",
    )
    parser.add_argument(
        "--synetune-first",
        choices=["midpoint", "none"],
        default="midpoint",
        help="Syne Tune's first configuration: the space's midpoint (its default, every seed) or none",
    )
    parser.add_argument(
        "--synetune-model-seeds", type=int, help="seeds for MOBSTER and Hyper-Tune (default: --seeds)"
    )
    parser.add_argument(
        "--ray-python",
        type=Path,
        help="Ray's interpreter: add Ray Tune's ASHA as a peer (bench/search/peer_ray.py)",
    )
    parser.add_argument(
        "--json",
        type=Path,
        help="default: runs/bench_search_<problem>.json; several problems: one file each, <stem>_<problem>.json",
    )
    options = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # `all` is every problem recorded so far: a fresh set's study files land before its recordings do
    names = RECORDED if options.problem == "all" else [options.problem]
    if options.problem != "all" and options.problem not in RECORDED:
        parser.exit(2, unrecorded(options.problem) + "\n")
    for name in names:
        run_problem(name, options, json_path(options.json, name, several=len(names) > 1))


def unrecorded(name: str) -> str:
    """Why a problem cannot be replayed yet, and the command that records it."""
    return (
        f"--problem {name}: not recorded yet (no {PROBLEMS[name].data_file.relative_to(ROOT)}); "
        f"record it first: python bench/search/record.py --problem {name}"
    )


def json_path(given: Path | None, problem: str, several: bool) -> Path:
    """Where a problem's JSON goes: --json as given for one problem; for several, one file each beside it
    (`out.json` -> `out_digits.json`); without --json, runs/bench_search_<problem>.json."""
    if given is None:
        return ROOT / "runs" / f"bench_search_{problem}.json"
    return given.with_name(f"{given.stem}_{problem}{given.suffix}") if several else given


def run_problem(name: str, options: argparse.Namespace, out: Path) -> None:
    """Every method on `name` for the seeds asked: print the table and the ratios, write the JSON."""
    seeds = 3 if options.quick else options.seeds
    recording = load(PROBLEMS[name])
    budget_s = budget_of(recording) * options.budget_x
    methods = [
        m for m in methods_for(recording.problem) if not options.only or m.name in options.only.split(",")
    ]
    targets = {q: recording.target(q) for q in QUANTILES}
    default = Costs.of(recording)
    costs = Costs(
        default.start_s if options.start_s is None else options.start_s,
        default.pause_s if options.pause_s is None else options.pause_s,
        default.resume_s if options.resume_s is None else options.resume_s,
    )
    print(
        f"{name}: {len(recording.curves)} recorded configurations, targets "
        + ", ".join(f"q{round(q * 100)} {t:.4f}" for q, t in targets.items())
        + f"; budget {budget_s:.1f} s wall on {recording.problem.workers} workers"
        + (f", {options.n_trials} configurations" if options.n_trials else " (a time limit)")
        + f"; {seeds} seeds; costs: start {costs.start_s} s, pause {costs.pause_s} s, resume {costs.resume_s} s"
        + "; median [25th, 75th percentile] (seeds that reached it)"
    )
    started = time.perf_counter()
    per_seed: dict[str, list[RunFigures]] = {}
    for method in methods:
        per_seed[method.name] = run_method(recording, method, seeds, budget_s, options.n_trials, costs)
    peers = PEERS
    if options.synetune_python:
        synetune = synetune_runs(recording, options, seeds, budget_s, costs)
        per_seed |= synetune
        peers = (*peers, *synetune)
    if options.ray_python:
        ray = ray_runs(recording, options, seeds, budget_s, costs)
        per_seed |= ray
        peers = (*peers, *ray)
    summaries = {m: summarise(runs) for m, runs in per_seed.items()}
    print(table(summaries))
    if HPO_METHOD in summaries and summaries.keys() & set(peers):
        print("\n".join(against_best_other(summaries, peers)))
    print(f"simulated in {time.perf_counter() - started:.1f} s")
    out.parent.mkdir(parents=True, exist_ok=True)
    payload: dict[str, Any] = {
        "problem": name,
        "seeds": seeds,
        "budget_s": budget_s,
        "n_trials": options.n_trials,
        "costs": asdict(costs),
        "targets": {str(q): t for q, t in targets.items()},
        "recording": recording.conditions,
        "summary": {m: {k: asdict(v) for k, v in figures.items()} for m, figures in summaries.items()},
        "runs": {m: [asdict(r) for r in runs] for m, runs in per_seed.items()},
    }
    out.write_text(json.dumps(payload, indent=1, default=str))
    print(f"wrote {out}")


@dataclass
class PeerOutcome:
    """What `run_figures` reads of an Outcome, from a peer's JSON run."""

    trace: list[tuple[float, float]]
    busy_s: float
    trials: list[int]
    resumes: int
    trial_steps: int


def synetune_runs(
    recording: Recording, options: argparse.Namespace, seeds: int, budget_s: float, costs: Costs
) -> dict[str, list[RunFigures]]:
    """peer_synetune.py in Syne Tune's interpreter, on this problem's recording, budget, workers, rungs and costs;
    each seed's trace (evaluations after the budget left out, as our simulator stops there) judged by run_figures."""
    problem = recording.problem
    names = options.synetune_schedulers.split(",")
    groups = [
        ([n for n in names if n not in SYNETUNE_MODEL_BASED], seeds),
        ([n for n in names if n in SYNETUNE_MODEL_BASED], options.synetune_model_seeds or seeds),
    ]
    out: dict[str, list[RunFigures]] = {}
    for group, group_seeds in groups:
        if not group:
            continue
        command = [
            *peer_command(options.synetune_python, "peer_synetune.py", recording, budget_s),
            "--rungs=" + ",".join(str(level // problem.eval_every) for level in problem.asha_levels),
            f"--start-s={costs.start_s}",
            f"--pause-s={costs.pause_s}",
            f"--resume-s={costs.resume_s}",
            f"--seeds={group_seeds}",
            "--schedulers=" + ",".join(group),
            f"--first={options.synetune_first}",
        ]
        started = time.perf_counter()
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        print(f"Syne Tune {', '.join(group)}: {group_seeds} seeds in {time.perf_counter() - started:.1f} s")
        for name, runs in json.loads(done.stdout).items():
            out[SYNETUNE[name]] = peer_figures(runs, recording, budget_s)
    return out


def peer_command(python: Path, script: str, recording: Recording, budget_s: float) -> list[str]:
    """A peer script in its own interpreter, with what every peer needs: the recording, the study's space as JSON, the
    metric, the workers and the budget."""
    problem = recording.problem
    space = {name: param.model_dump(exclude_none=True) for name, param in recording.space.items()}
    return [
        str(python),
        str(Path(__file__).resolve().parent / script),
        f"--data={problem.data_file}",
        f"--space={json.dumps(space)}",
        f"--metric={recording.metric}",
        f"--workers={problem.workers}",
        f"--budget-s={budget_s}",
    ]


def peer_figures(runs: list[dict[str, Any]], recording: Recording, budget_s: float) -> list[RunFigures]:
    """A peer's JSON runs judged by run_figures (evaluations after the budget left out, as our simulator stops there)."""
    targets = {q: recording.target(q) for q in QUANTILES}
    return [
        run_figures(
            PeerOutcome(
                trace=[(t, v) for t, v in run["trace"] if t <= budget_s],
                busy_s=run["busy_s"],
                trials=list(range(run["trials"])),
                resumes=run["resumes"],
                trial_steps=run["evaluations"],
            ),  # type: ignore[arg-type]
            targets,
            budget_s,
            recording.maximize,
            recording.regret_scale(),
        )
        for run in runs
    ]


def ray_runs(
    recording: Recording, options: argparse.Namespace, seeds: int, budget_s: float, costs: Costs
) -> dict[str, list[RunFigures]]:
    """peer_ray.py in Ray's interpreter: Ray Tune's ASHAScheduler at our paper-style ASHA's rungs, random search."""
    problem = recording.problem
    command = [
        *peer_command(options.ray_python, "peer_ray.py", recording, budget_s),
        f"--grace={problem.asha_levels[0] // problem.eval_every}",
        f"--eta={problem.eta}",
        f"--start-s={costs.start_s}",
        f"--seeds={seeds}",
    ]
    started = time.perf_counter()
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    print(f"Ray Tune ASHA: {seeds} seeds in {time.perf_counter() - started:.1f} s")
    return {"Ray Tune ASHA": peer_figures(json.loads(done.stdout)["ray-asha"], recording, budget_s)}


if __name__ == "__main__":
    main()
