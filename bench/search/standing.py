"""Issue 36's bar applied to every method, not only to hpo's: over every problem that what ships and the peers ran
on (several run folders merged), each method against the best of the *others* at each problem.

    python bench/search/standing.py --runs runs/r11/all runs/r11/fresh4      # the 25 problems (docs/search-rounds.md)
    python bench/search/standing.py --runs runs/r11/all runs/r11/fresh4 --problems fresh3-charsource,...  # some
    python bench/search/standing.py --runs runs/standing runs/r13/fresh5 runs/r13/select --candidate NAME
    python bench/search/standing.py --runs runs/r21/measured --candidate NAME --peers "random,TPE,TPE + SH"  # fewer

Why: the bar (no problem later than 1.2x the best peer's median time to q95) is a bar against the best of six on
each problem, a different peer on each. Whether any method meets it on this suite says whether missing it is a
defect of hpo's default or the noise and the spread of problems; the bootstrap interval says which misses the seeds
can tell from 1.2x.

Tables: (1) per method, over all problems: the average rank by normalised regret among the methods, how many
problems it is over 1.2x the best of the others at q95 (and on how many of those the 90 % interval of the ratio lies
wholly over 1.2x), its worst ratio and where, the geometric mean of its ratios, and its final best normalised (0 the
best recorded configuration, 1 the median one); (2) per problem, every method's ratio, over 1.2x in bold. With
`--candidate`, a candidate's runs stand in for what ships' (a round's selection: would it meet the bar better?).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from bench.search import heldout  # noqa: E402
from bench.search.figures import RunFigures  # noqa: E402
from bench.search.methods import SHIPPED  # noqa: E402
from bench.search.report import final_regret, gather, header, regret_scales, row  # noqa: E402

BAR = 1.2
PEERS = ("random", "TPE", "TPE + median", "TPE + SH", "Syne Tune stop ASHA", "Ray Tune ASHA")
Table = dict[str, dict[str, list[RunFigures]]]


def merged(folders: list[Path]) -> tuple[Table, dict[str, float], dict[str, tuple[float, float]]]:
    """Every folder's problems, their methods together (a method of a problem in two folders: the later folder's
    runs). Runs of one problem on two budgets (another recording of it) are refused: their times do not compare."""
    table: Table = {}
    budgets: dict[str, float] = {}
    scales: dict[str, tuple[float, float]] = {}
    for folder in folders:
        problems, folder_budgets, _ = gather(folder)
        for name, runs in problems.items():
            if name in budgets and not math.isclose(budgets[name], folder_budgets[name], rel_tol=1e-6):
                raise ValueError(
                    f"{name}: runs on two budgets ({budgets[name]:g} s and {folder_budgets[name]:g} s in "
                    f"{folder}): recordings of another size; give one of them"
                )
            table.setdefault(name, {}).update(runs)
        budgets.update(folder_budgets)
        scales.update(regret_scales(folder))
    return table, budgets, scales


def missing_methods(table: Table, methods: list[str]) -> list[str]:
    """'method on problem' for each method a problem did not run: the comparison needs all of them everywhere."""
    return [f"{m} on {name}" for name, runs in table.items() for m in methods if m not in runs]


def ratio_to_others(
    runs: dict[str, list[RunFigures]], method: str, methods: list[str], budget_s: float
) -> tuple[str, float, float, float]:
    """(best other, ratio of medians, 90 % interval) of `method`'s time to q95 against the best of the others."""
    others = [m for m in methods if m != method]
    return heldout.time_ratio_interval(runs, method, others, budget_s)


def summary_lines(
    table: Table, budgets: dict[str, float], scales: dict[str, tuple[float, float]], methods: list[str]
) -> list[str]:
    ratios = {
        m: {n: ratio_to_others(runs, m, methods, budgets[n]) for n, runs in table.items()} for m in methods
    }
    ranks = [heldout.ranks(runs, methods) for runs in table.values()]
    lines = [
        f"Over {len(table)} problems, each method against the best of the other {len(methods) - 1} at each "
        f"(median time to q95; interval: 90 % bootstrap of the ratio):",
        "",
        *header(
            [
                "method",
                "average regret rank",
                f"over {BAR}x at q95",
                f"interval wholly over {BAR}x",
                "worst (where)",
                "geometric mean ratio",
                "final best, normalised",
            ]
        ),
    ]
    for m in sorted(methods, key=lambda m: np.mean([r[m] for r in ranks])):
        mine = ratios[m]
        over = [n for n, (_, r, _, _) in mine.items() if r > BAR]
        sure = [n for n, (_, _, low, _) in mine.items() if low > BAR]
        worst = max(mine, key=lambda n: mine[n][1])
        cells = [
            f"{np.mean([r[m] for r in ranks]):.2f}",
            f"{len(over)} of {len(table)}",
            f"{len(sure)}" + (f" ({', '.join(sure)})" if sure else ""),
            f"{mine[worst][1]:.2f}x ({worst})",
            f"{math.exp(np.mean([math.log(r) for _, r, _, _ in mine.values()])):.3f}",
            f"{np.mean([final_regret(runs[m], scales[n]) for n, runs in table.items()]):.3f}",
        ]
        lines.append(row([label(m), *cells]))
    lines += [
        "",
        "Per problem, each method's ratio to the best of the others at q95 (over the bar in bold):",
        "",
    ]
    lines += header(["problem", *map(label, methods)])
    for name in table:
        cells = [ratios[m][name][1] for m in methods]
        lines.append(row([name, *(f"**{r:.2f}**" if r > BAR else f"{r:.2f}" for r in cells)]))
    return lines


def label(method: str) -> str:
    return "hpo (what ships)" if method == SHIPPED else method.removeprefix("hpo: ")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=Path, nargs="+", required=True, help="run folders (suite.py --out)")
    parser.add_argument(
        "--problems",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        help="comma-separated: only these problems (e.g. the fresh sets recorded after what ships was chosen)",
    )
    parser.add_argument(
        "--candidate",
        help="a candidate's name (candidates.py): judged in what ships' place, against the same peers",
    )
    parser.add_argument(
        "--peers",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        default=list(PEERS),
        help=f"comma-separated: the peers judged against (default: {','.join(PEERS)}); fewer where the others did "
        "not run (a suite run on costs their simulators do not charge, suite.py --report-s)",
    )
    parser.add_argument("--out", type=Path)
    options = parser.parse_args()
    if empty := [str(f) for f in options.runs if not any(f.glob("*.json"))]:
        parser.error(f"--runs: no problem's runs (*.json) in {', '.join(empty)}")
    try:
        table, budgets, scales = merged(options.runs)
    except ValueError as error:
        parser.error(f"--runs: {error}")
    if options.problems:
        if unknown := [name for name in options.problems if name not in table]:
            parser.error(f"--problems: no runs of {', '.join(unknown)} in --runs")
        table = {name: table[name] for name in options.problems}
    methods = [options.candidate or SHIPPED, *options.peers]
    if missing := missing_methods(table, methods):
        parser.error(f"--runs: these did not run: {'; '.join(missing[:5])}; run suite.py with them first")
    text = "\n".join(summary_lines(table, budgets, scales, methods))
    print(text)
    if options.out:
        options.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
