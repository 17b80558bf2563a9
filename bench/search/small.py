"""Small studies: what early stopping costs when the study is bounded by its trial count, not by time.

    python bench/search/small.py --seeds 100 --jobs 2      # every recorded problem at 8, 15 and 30 trials: ~15 min

The suite (suite.py) gives every method the same wall budget, so time a method saves buys it more configurations.
A study file with `n_trials: 8` ends after eight trials whatever they cost: stopping a trial early saves time and
cannot buy anything back, and a trial stopped from the second on is a configuration the study never finishes. Each
problem's study at `--trials` configurations (100 seeds, 2 workers, the problems' costs), for hpo's two stop-type
defaults and Optuna's median pruner at its defaults (5 start-up trials; hpo's default for a file without a pruner
before issue 36), against TPE without any pruning, the baseline run beside them:

- final: on how many problems the median best score at the end is worse / better than the baseline's;
- paired: over every problem's seeds (same sampler seed), how many runs end worse / better than the baseline's;
- compute: worker-seconds spent, as a ratio to the baseline's (geometric mean over the problems);
- regret: mean normalised regret over the problem's wall budget (0: the recorded best at once; the study's time
  after it ends counts at its final best).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import sys
from pathlib import Path

import numpy as np
import optuna

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from bench.search.figures import QUANTILES, RunFigures, run_figures  # noqa: E402
from bench.search.methods import NO_PRUNER_NAMED, SHIPPED, methods_for  # noqa: E402
from bench.search.problems import PROBLEMS  # noqa: E402
from bench.search.recording import load  # noqa: E402
from bench.search.simulate import budget_of, simulate  # noqa: E402

BASELINE = "tpe"
METHODS = (SHIPPED, NO_PRUNER_NAMED, "tpe+median")
Runs = dict[str, list[RunFigures]]  # method -> one RunFigures per seed


def one_problem(task: tuple[str, int, int]) -> tuple[str, int, bool, Runs]:
    """Every method and the baseline on one problem at `trials` configurations, seeds 0..seeds-1."""
    name, trials, seeds = task
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    recording = load(PROBLEMS[name])
    budget_s = budget_of(recording)
    targets = {q: recording.target(q) for q in QUANTILES}
    known = {m.name: m for m in methods_for(recording.problem)}
    runs: Runs = {}
    for method in (BASELINE, *METHODS):
        runs[method] = [
            run_figures(
                simulate(recording, known[method], seed, budget_s=budget_s, n_trials=trials),
                targets,
                budget_s,
                recording.maximize,
                recording.regret_scale(),
            )
            for seed in range(seeds)
        ]
    return name, trials, recording.maximize, runs


def final(run: RunFigures) -> float:
    return run.best_at[1.0]


def summary_rows(trials: int, problems: dict[str, tuple[bool, Runs]]) -> list[str]:
    rows = []
    for method in (*METHODS, BASELINE):
        worse = better = paired_worse = paired_better = 0
        ratios, regrets = [], []
        for maximize, runs in problems.values():
            sign = 1.0 if maximize else -1.0
            ours = np.array([final(r) for r in runs[method]])
            base = np.array([final(r) for r in runs[BASELINE]])
            gap = sign * (np.median(ours) - np.median(base))
            worse, better = worse + int(gap < -1e-12), better + int(gap > 1e-12)
            paired = sign * (ours - base)
            paired_worse += int((paired < -1e-12).sum())
            paired_better += int((paired > 1e-12).sum())
            compute = np.median([r.compute_s for r in runs[method]])
            ratios.append(compute / np.median([r.compute_s for r in runs[BASELINE]]))
            regrets.append(np.mean([r.regret_auc for r in runs[method]]))
        gm = math.exp(float(np.mean(np.log(ratios))))
        rows.append(
            f"| {trials} | {method} | {worse} / {better} of {len(problems)} | {paired_worse} / {paired_better} | "
            f"{gm:.2f}x | {np.mean(regrets):.4f} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--trials", default="8,15,30", help="comma-separated trial counts")
    parser.add_argument("--problems", default="all", help="comma-separated names, or all (the fresh set too)")
    parser.add_argument("--jobs", type=int, default=max(1, multiprocessing.cpu_count() - 1))
    options = parser.parse_args()
    names = sorted(PROBLEMS) if options.problems == "all" else options.problems.split(",")
    counts = [int(n) for n in options.trials.split(",")]
    tasks = [(name, n, options.seeds) for n in counts for name in names]
    by_count: dict[int, dict[str, tuple[bool, Runs]]] = {n: {} for n in counts}
    with multiprocessing.get_context("fork").Pool(options.jobs) as pool:
        for name, n, maximize, runs in pool.imap_unordered(one_problem, tasks):
            by_count[n][name] = (maximize, runs)
    print(
        f"{len(names)} problems, {options.seeds} seeds, 2 workers; baseline {BASELINE} (no pruning); final and "
        "paired: worse / better than the baseline"
    )
    print("| trials | method | final | paired seeds | compute | regret |")
    print("|---|---|---|---|---|---|")
    for n in counts:
        print("\n".join(summary_rows(n, by_count[n])))


if __name__ == "__main__":
    main()
