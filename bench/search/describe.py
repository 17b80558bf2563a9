"""What each recorded problem of the suite is like, measured from its recording: the table of problems in
docs/benchmarks.md.

    python bench/search/describe.py

Per problem: configurations, evaluations a trial, the median cost of a full trial and the simulated wall budget,
the targets, and two figures that say what makes a schedule right or wrong there: the Spearman rank correlation
between a configuration's value at the first evaluation and its final score (high: curves rank early, a low rung
judges well; low: curves cross late, a low rung misleads), and the share of configurations whose final score ties
with another's (a coarse or noisy evaluation).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from bench.search.problems import PROBLEMS  # noqa: E402
from bench.search.recording import Recording, load  # noqa: E402
from bench.search.simulate import budget_of  # noqa: E402
from hpo.scheduling.rank_gate import spearman  # noqa: E402


def early_rank(recording: Recording, evaluation: int = 0) -> float:
    """Spearman correlation of the value at `evaluation` (0: the first) with the final score, over configurations."""
    pairs = [(c.values[evaluation], recording.final(i)) for i, c in enumerate(recording.curves)]
    return spearman(pairs)


def ties(recording: Recording) -> float:
    finals = recording.finals()
    _, counts = np.unique(finals, return_counts=True)
    return float(counts[counts > 1].sum() / len(finals))


def row(recording: Recording) -> list[str]:
    problem = recording.problem
    full = float(np.median(recording.full_trial_s()))
    targets = " / ".join(f"{recording.target(q):.4g}" for q in (0.9, 0.95, 0.99))
    third = len(recording.steps) // 3
    direction = "max" if recording.maximize else "min"
    return [
        problem.name,
        str(problem.study.relative_to(ROOT)),
        f"{recording.metric.removeprefix('eval_')} ({direction})",
        str(len(recording.curves)),
        f"{len(recording.steps)} x {problem.eval_every}",
        f"{full:.2f}",
        f"{budget_of(recording):.1f}",
        targets,
        f"{early_rank(recording):.2f} / {early_rank(recording, third - 1):.2f}",
        f"{ties(recording):.0%}",
    ]


def main() -> None:
    argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0]).parse_args()
    header = [
        "problem",
        "study",
        "metric",
        "configurations",
        "evaluations x steps",
        "full trial (s)",
        "budget (s)",
        "q90 / q95 / q99",
        "rank corr. 1st eval / 1/3",
        "tied finals",
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for problem in PROBLEMS.values():
        if problem.data_file.exists():
            print("| " + " | ".join(row(load(problem))) + " |")


if __name__ == "__main__":
    main()
