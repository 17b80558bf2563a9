"""The suite: every method on every recorded problem, many seeds, then the held-out table (bench/search/report.py).

    python bench/search/suite.py --seeds 100 --jobs 2                     # Optuna's methods and hpo's candidates
    python bench/search/suite.py --seeds 100 --synetune-python .venv-syne/bin/python \\
        --ray-python .venv-ray/bin/python --smac-python .venv-smac/bin/python   # and the peers in their venvs
    python bench/search/report.py                                          # the tables, from runs/suite/*.json

Each problem's runs go to runs/suite/<problem>.json ({method: [figures per seed]}), merged with what is there, so the
peers (slow, in their own environments) and our methods can be run apart and on other machines; `--only` picks
methods, `--problems` problems. `--fresh` runs the fresh set (problems made after every choice) into runs/fresh,
where no choice reads them: `report.py --fresh` judges the rule's pick there. Simulations are spread over `--jobs`
processes (one seed of one method each).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from functools import cache
from pathlib import Path
from typing import Any

import optuna

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from bench.search import peers  # noqa: E402
from bench.search.candidates import candidates_for, explored_for  # noqa: E402
from bench.search.figures import QUANTILES, RunFigures, run_figures  # noqa: E402
from bench.search.methods import NO_PRUNER_NAMED, SHIPPED, Method, methods_for  # noqa: E402
from bench.search.problems import PROBLEMS, Problem  # noqa: E402
from bench.search.recording import Recording, load  # noqa: E402
from bench.search.simulate import budget_of, simulate  # noqa: E402

OUT = ROOT / "runs" / "suite"
FRESH_OUT = ROOT / "runs" / "fresh"  # the fresh set's runs, apart: no choice reads them (report.py --fresh)
OPTUNA_PEERS = {
    "random": "random",
    "tpe": "TPE",
    "tpe+median": "TPE + median",  # also hpo's out-of-the-box pruning: a study file that names none gets it
    "tpe+sh": "TPE + SH",
    "tpe+hyperband": "TPE + Hyperband",
}


@cache
def recording_of(name: str) -> Recording:
    return load(PROBLEMS[name])


def methods_of(name: str) -> dict[str, Method]:
    """The simulated methods on a problem, by the suite's names: Optuna's peers, hpo's candidates, and what hpo
    ships (`scheduler: {type: asha}`, and a study file that names no pruner, as hpo builds them)."""
    problem = PROBLEMS[name]
    known = {m.name: m for m in methods_for(problem)}
    named = {label: known[key] for key, label in OPTUNA_PEERS.items()}
    ours = {label: known[label] for label in (SHIPPED, NO_PRUNER_NAMED)}
    pool = [*candidates_for(problem), *explored_for(problem)]
    return named | {m.name: m for m in pool} | ours


def one_run(task: tuple[str, str, int]) -> tuple[str, str, int, dict[str, Any]]:
    """One seed of one method on one problem (a pool worker's unit of work)."""
    name, method, seed = task
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    recording = recording_of(name)
    budget_s = budget_of(recording)
    targets = {q: recording.target(q) for q in QUANTILES}
    outcome = simulate(recording, methods_of(name)[method], seed, budget_s=budget_s)
    figures = run_figures(outcome, targets, budget_s, recording.maximize, recording.regret_scale())
    return name, method, seed, asdict(figures)


def simulate_all(
    names: list[str], only: set[str] | None, seeds: int, jobs: int
) -> Iterator[tuple[str, dict[str, list[dict]]]]:
    """Each problem's runs ({method: [figures per seed]}) as soon as that problem is done, one problem at a time."""
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        for name in names:
            tasks = [
                (name, method, seed)
                for method in methods_of(name)
                if only is None or method in only
                for seed in range(seeds)
            ]
            found: dict[str, list[tuple[int, dict]]] = {}
            for _, method, seed, figures in pool.imap_unordered(one_run, tasks, chunksize=4):
                found.setdefault(method, []).append((seed, figures))
            yield name, {m: [f for _, f in sorted(runs)] for m, runs in found.items()}


def save(name: str, runs: dict[str, list[dict]], out: Path) -> Path:
    """Merge `runs` into out/<name>.json (a method run again replaces its old runs)."""
    path = out / f"{name}.json"
    stored = json.loads(path.read_text()) if path.exists() else {"runs": {}}
    recording = recording_of(name)
    stored.update(
        problem=name,
        budget_s=budget_of(recording),
        targets={str(q): recording.target(q) for q in QUANTILES},
        regret_scale=list(recording.regret_scale()),
        configurations=len(recording.curves),
    )
    stored["runs"] |= {
        method: {"seeds": len(figures), "figures": figures} for method, figures in runs.items()
    }
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stored, default=str))
    return path


def load_runs(path: Path) -> tuple[dict[str, Any], dict[str, list[RunFigures]]]:
    """A problem's stored runs as RunFigures (JSON keys back to floats)."""
    stored = json.loads(path.read_text())
    runs = {}
    for method, entry in stored["runs"].items():
        runs[method] = [
            RunFigures(
                to_target={float(k): v for k, v in f["to_target"].items()},
                best_at={float(k): v for k, v in f["best_at"].items()},
                compute_s=f["compute_s"],
                trials=f["trials"],
                resumes=f["resumes"],
                evaluations=f["evaluations"],
                regret_auc=f["regret_auc"],
            )
            for f in entry["figures"]
        ]
    return stored, runs


def merge(source: Path, out: Path) -> None:
    """Merge every problem's runs in `source` (a suite run on another machine) into `out`'s files."""
    for path in sorted(source.glob("*.json")):
        stored = json.loads(path.read_text())
        runs = {method: entry["figures"] for method, entry in stored["runs"].items()}
        print(f"merged {stored['problem']}: {len(runs)} methods into {save(stored['problem'], runs, out)}")


def recorded(fresh: bool = False) -> list[str]:
    """The recorded problems of the suite, or of the fresh set (`Problem.fresh`)."""
    return [
        name for name, problem in PROBLEMS.items() if problem.data_file.exists() and problem.fresh == fresh
    ]


def scale_overheads(factor: float) -> None:
    """Every problem's per-trial start, pause and resume costs times `factor`, for the peers' runs too (they read the
    problem): how far the verdicts hang on costs the simulator assumes (real 2-worker runs start fewer trials than
    simulated; docs/search-rounds.md, "Real runs")."""
    for name, problem in PROBLEMS.items():
        PROBLEMS[name] = dataclasses.replace(
            problem,
            start_s=problem.start_s * factor,
            pause_s=problem.pause_s * factor,
            resume_s=problem.resume_s * factor,
        )


def raise_start_costs(start_s: float) -> None:
    """Every problem's per-trial start cost at least `start_s`, for the peers' runs too (they read the problem).
    `crosscheck.py` implies 0.20 s in the median over 10 problems run for real here, against the 0.086 s measured
    on digits that the tabular problems simulate (docs/search-rounds.md, "A per-problem start cost"); the text problems
    keep their own, higher, measured cost."""
    for name, problem in PROBLEMS.items():
        PROBLEMS[name] = dataclasses.replace(problem, start_s=max(problem.start_s, start_s))


def charge_reports(
    report_s: float, start_inside_s: float | None, between_s: float, save_s: float = 0.0
) -> None:
    """Every problem's report and checkpoint costs and per-trial start as trial_costs.py measures a real trial's
    (simulate.Costs): `start_inside_s` after the claim and `between_s` before it make the start; a problem that
    measured a dearer start of its own (minilm-lora loads a pretrained model: 0.255 s) keeps it, `between_s` of it
    before the claim. For simulate.py's methods only: the peers' own simulators charge neither."""
    # the default start is what digits measured, the tabular and character problems' start
    usual = Problem.__dataclass_fields__["start_s"].default
    for name, problem in PROBLEMS.items():
        start = problem.start_s
        if start_inside_s is not None:
            start = start if start > usual else start_inside_s + between_s
        inside = None if start_inside_s is None else start - between_s
        PROBLEMS[name] = dataclasses.replace(
            problem, start_s=start, report_s=report_s, save_s=save_s, start_inside_s=inside
        )


def add_cost_arguments(parser: argparse.ArgumentParser) -> None:
    """The measured costs' options (charge_reports), for suite.py and agreement.py alike."""
    parser.add_argument(
        "--report-s",
        type=float,
        default=0.0,
        help="charge each report of a method that stops trials this (seconds; trial_costs.py measures it); "
        "simulate.py's methods only",
    )
    parser.add_argument(
        "--save-s",
        type=float,
        default=0.0,
        help="charge each checkpoint at a trial's new best this, any method (seconds; save_strategy: best)",
    )
    parser.add_argument(
        "--start-inside-s",
        type=float,
        help="a trial's start after its claim (s); with --between-s, the start before it, the whole start",
    )
    parser.add_argument("--between-s", type=float, default=0.0, help="with --start-inside-s (s)")


def costs_given(options: argparse.Namespace) -> bool:
    return bool(options.report_s or options.save_s) or options.start_inside_s is not None


def apply_cost_arguments(parser: argparse.ArgumentParser, options: argparse.Namespace) -> None:
    """charge_reports with the options add_cost_arguments made, when any is given (before any simulation: the
    forked workers see the problems as changed here)."""
    if not costs_given(options):
        return
    if options.start_s and options.start_inside_s is not None:
        parser.error("--start-s with --start-inside-s: give the start as --start-inside-s and --between-s")
    charge_reports(options.report_s, options.start_inside_s, options.between_s, options.save_s)


def use_recordings_in(folder: Path) -> None:
    """Every problem's recording read from `folder` (same file names), for the peers' runs too (they read the
    problem's data_file): a denser recording of the same draws (record.py --configurations) replays there."""
    for name, problem in PROBLEMS.items():
        PROBLEMS[name] = dataclasses.replace(problem, data_dir=folder.resolve())


def chosen_methods(parser: argparse.ArgumentParser, only: str | None, names: list[str]) -> set[str] | None:
    """`--only`'s method names, each known on some problem: a name the suite does not know (a typo, or a name with a
    comma split in two) is refused, not run as nothing."""
    if not only:
        return None
    chosen = {name.strip() for name in only.split(",")}
    known = {method for name in names for method in methods_of(name)}
    unknown = sorted(chosen - known)
    if unknown:
        parser.error(f"--only: unknown method(s) {unknown}; the suite's names: {', '.join(sorted(known))}")
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--problems", help="comma-separated (default: every recorded problem)")
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=max(1, multiprocessing.cpu_count() - 1))
    parser.add_argument("--only", help="comma-separated method names (the suite's names)")
    parser.add_argument("--fresh", action="store_true", help="the fresh set's problems, into runs/fresh")
    parser.add_argument(
        "--out", type=Path, help=f"default: {OUT.relative_to(ROOT)} ({FRESH_OUT.relative_to(ROOT)})"
    )
    parser.add_argument("--no-simulated", action="store_true", help="only the peers in their own venvs")
    parser.add_argument("--merge-from", type=Path, help="only merge the runs in this folder into --out")
    parser.add_argument(
        "--overhead-scale",
        type=float,
        default=1.0,
        help="multiply every problem's start, pause and resume costs (a sensitivity run: give it its own --out)",
    )
    parser.add_argument(
        "--start-s",
        type=float,
        help="every problem's per-trial start cost at least this (seconds; crosscheck.py's median: 0.20)",
    )
    add_cost_arguments(parser)
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="read the recordings from this folder instead of bench/search/data (e.g. bench/search/data/dense; "
        "give the runs their own --out); the problems are those recorded there",
    )
    peers.add_arguments(parser)
    options = parser.parse_args()
    options.out = options.out or (FRESH_OUT if options.fresh else OUT)
    # runs made on other costs or other recordings must not mix with the suite's own
    changed = [
        flag
        for flag, given in (
            ("--overhead-scale", options.overhead_scale != 1.0),
            ("--start-s", bool(options.start_s)),
            ("--data-dir", options.data_dir is not None),
            ("--report-s", costs_given(options)),
        )
        if given
    ]
    if changed and options.out.resolve() in (OUT.resolve(), FRESH_OUT.resolve()):
        parser.error(f"{changed[0]}: give the runs their own --out (runs/suite holds the suite's own runs)")
    if options.overhead_scale != 1.0:
        scale_overheads(options.overhead_scale)
    if options.start_s:
        raise_start_costs(options.start_s)
    if costs_given(options) and (options.synetune_python or options.ray_python or options.smac_python):
        parser.error("--report-s, --save-s, --start-inside-s: the peers' own simulators do not charge them")
    apply_cost_arguments(parser, options)
    if options.data_dir:
        if not options.data_dir.is_dir():
            parser.error(f"--data-dir: {options.data_dir} is not a folder of recordings")
        use_recordings_in(options.data_dir)
    if options.merge_from:
        merge(options.merge_from, options.out)
        return
    names = options.problems.split(",") if options.problems else recorded(options.fresh)
    only = chosen_methods(parser, options.only, names)
    started = time.perf_counter()
    if not options.no_simulated:
        for name, runs in simulate_all(names, only, options.seeds, options.jobs):
            print(f"{time.perf_counter() - started:.0f} s: wrote {save(name, runs, options.out)}", flush=True)
    for name in names:
        for label, runs in peers.run_all(recording_of(name), budget_of(recording_of(name)), options):
            save(name, {label: runs}, options.out)  # each peer as it ends: the slow ones take hours


if __name__ == "__main__":
    main()
