"""How far the suite's verdicts hang on the overheads the simulator assumes: the same methods, seeds and problems at the
problems' costs and with every start, pause and resume cost scaled (`suite.py --overhead-scale`), side by side.

    python bench/search/suite.py --seeds 50 --jobs 2 --overhead-scale 3 --only "$METHODS" --out runs/scaled/suite
    python bench/search/suite.py --fresh --seeds 50 --jobs 2 --overhead-scale 3 --only "$METHODS" --out runs/scaled/fresh
    python bench/search/suite.py --seeds 50 --no-simulated --overhead-scale 3 --ray-python .venv-ray/bin/python \\
        --synetune-python .venv-syne/bin/python --synetune-schedulers stop-asha,promotion-asha --out runs/scaled/suite
    (the same with --fresh --out runs/scaled/fresh)
    python bench/search/sensitivity.py --scaled runs/scaled --seeds 50

Real 2-worker runs start fewer trials than simulated (docs/search-rounds.md, "Real runs"), so the costs a new trial pays
are the simulator's likeliest error; a method that starts many trials gains from costs set too low. Each line: a
method's average rank beside the peers (by mean normalised regret, the first `--seeds` seeds), its place, the first
method, its worst ratio to the best peer and on how many problems that ratio is over 1.2x, and the median number of
trials a run starts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from bench.search import heldout, report  # noqa: E402
from bench.search.candidates import PROMOTION_RUNG  # noqa: E402
from bench.search.figures import RunFigures  # noqa: E402
from bench.search.suite import FRESH_OUT, OUT  # noqa: E402

PEERS = [
    "random",
    "TPE",
    "TPE + median",
    "TPE + SH",
    "TPE + Hyperband",
    "Ray Tune ASHA",
    "Syne Tune stop ASHA",
    "Syne Tune promotion ASHA",
]
Problems = dict[str, dict[str, list[RunFigures]]]


def load(folder: Path, seeds: int, pick: str) -> tuple[Problems, dict[str, float]]:
    problems, budgets, _ = report.gather(folder)
    wanted = [*PEERS, pick, PROMOTION_RUNG]
    return {n: {m: runs[m][:seeds] for m in wanted} for n, runs in problems.items()}, budgets


def line(label: str, problems: Problems, budgets: dict[str, float], method: str) -> str:
    methods = [*PEERS, method]
    ranks = {n: heldout.ranks(runs, methods) for n, runs in problems.items()}
    average = {m: float(np.mean([ranks[n][m] for n in problems])) for m in methods}
    order = sorted(methods, key=average.__getitem__)
    ratios = {n: heldout.ratio(problems[n], method, PEERS, budgets[n]) for n in problems}
    worst = max(ratios, key=ratios.__getitem__)
    trials = float(np.median([np.median([f.trials for f in problems[n][method]]) for n in problems]))
    return report.row(
        [
            label,
            method.removeprefix("hpo: "),
            f"{average[method]:.2f} ({order.index(method) + 1} of {len(methods)})",
            f"{order[0].removeprefix('hpo: ')} {average[order[0]]:.2f}",
            f"{ratios[worst]:.2f} ({worst})",
            f"{sum(r > 1.2 for r in ratios.values())} of {len(ratios)}",
            f"{trials:.0f}",
        ]
    )


def table(sets: dict[str, tuple[Path, Path]], seeds: int, pick: str) -> list[str]:
    columns = [
        "costs, problems",
        "method",
        "average rank",
        "first",
        "worst ratio",
        "over 1.2x",
        "trials a run",
    ]
    lines = report.header(columns)
    for costs, (suite, fresh) in sets.items():
        main, main_budgets = load(suite, seeds, pick)
        new, new_budgets = load(fresh, seeds, pick)
        for label, problems, budgets in (
            (f"{costs}, the 13", main, main_budgets),
            (f"{costs}, fresh", new, new_budgets),
            (f"{costs}, all {len(main) + len(new)}", main | new, main_budgets | new_budgets),
        ):
            lines += [line(label, problems, budgets, m) for m in (pick, PROMOTION_RUNG)]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--scaled", type=Path, required=True, help="the scaled runs: <folder>/suite and <folder>/fresh"
    )
    parser.add_argument("--label", default="x3", help="what the scaled runs' costs are, for the table")
    parser.add_argument(
        "--seeds", type=int, default=50, help="the first N seeds of each (as many as the scaled run)"
    )
    options = parser.parse_args()
    sets = {"x1": (OUT, FRESH_OUT), options.label: (options.scaled / "suite", options.scaled / "fresh")}
    # the rule's pick on the suite at its own costs (report.py's first line): the scaled runs must hold it
    print("\n".join(table(sets, options.seeds, report.rule_pick(OUT))))


if __name__ == "__main__":
    main()
