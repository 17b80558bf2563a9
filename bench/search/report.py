"""The suite's tables from runs/suite/*.json (bench/search/suite.py): every method on every problem, the average
rank, and hpo's default chosen on held-out problems (bench/search/heldout.py).

    python bench/search/report.py                  # markdown on stdout
    python bench/search/report.py --out docs/x.md  # and into a file
    python bench/search/report.py --fresh runs/fresh   # and the rule's pick judged on the fresh set
    python bench/search/report.py --with-explored      # rounds 4-6's candidates in the rule's pool too
    python bench/search/report.py --runs runs/s400all --pool "A,B"   # the rule on these candidates only (round 7)
    python bench/search/report.py --runs DIR --intervals   # only what ships against the best peer, with intervals

Tables: (1) normalised regret over time (mean over seeds) and the rank it gives on each problem, with the average
rank; (2) median time to the 95th percentile of the recorded final scores (seeds that reached it); (3) hpo's default
against the best peer on each problem: the ratio of median times to q90, q95, q99, the final best against the best
peer's, and the candidate chosen with that problem held out; (4) every method's final best over all problems at
once, each problem's in units of its best minus its median recorded final; (5) where a method's runs start every
recorded configuration, which flatters it (the simulator gives each once per run). With `--fresh`, the same tables on the
fresh set (problems made after the candidates and the rule were fixed, `suite.py --fresh`), where hpo's default is
the candidate the rule picks on all the suite's problems: nothing there was chosen on them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from bench.search import heldout  # noqa: E402
from bench.search.candidates import CURRENT, EXPLORED  # noqa: E402
from bench.search.figures import QUANTILES, RunFigures, Spread  # noqa: E402
from bench.search.methods import NO_PRUNER_NAMED, SHIPPED  # noqa: E402
from bench.search.suite import OUT, load_runs  # noqa: E402

DEFAULT = "hpo default (held-out)"
RATIO_MIN_SEEDS = 10
BEFORE = "hpo before"
SHIPPED_LABEL = "hpo shipped"  # `scheduler: {type: asha}` as hpo builds it
NO_PRUNER_LABEL = "hpo, no pruner named"  # a study file without pruner or scheduler, as hpo builds it
OURS = (SHIPPED, NO_PRUNER_NAMED)  # what hpo ships, each shown on its own, never chosen among the candidates


def gather(folder: Path) -> tuple[dict[str, dict[str, list[RunFigures]]], dict[str, float], dict[str, bool]]:
    """Each problem's runs, its budget, and whether its metric is maximised (its best recorded final is above the
    median one)."""
    problems, budgets, maximize = {}, {}, {}
    for path in sorted(folder.glob("*.json")):
        stored, runs = load_runs(path)
        name = stored["problem"]
        problems[name], budgets[name] = runs, stored["budget_s"]
        best, median = stored["regret_scale"]
        maximize[name] = best >= median
    return problems, budgets, maximize


class NoCandidates(ValueError):
    """The runs hold none of the rule's pool: the report cannot pick (a usage error, said in one line)."""


def split(
    problems: dict[str, dict[str, list[RunFigures]]],
    with_explored: bool = False,
    pool: list[str] | None = None,
) -> tuple[list[str], list[str], list[str]]:
    """(peers every problem has, hpo's candidates, peers only some problems have), in the order first seen. Rounds
    4-6 (candidates.EXPLORED) join the candidates only `with_explored`; `pool` names the candidates instead."""
    common = set.intersection(*(set(runs) for runs in problems.values()))
    ordered = list(dict.fromkeys(m for runs in problems.values() for m in runs))
    peers = [m for m in ordered if m in common and not m.startswith("hpo")]
    # What hpo ships is shown on its own, not chosen among the candidates.
    ours = [m for m in ordered if m in common and m.startswith("hpo") and m not in OURS]
    candidates = [m for m in ours if with_explored or m not in EXPLORED]
    if pool is not None:
        if missing := [m for m in pool if m not in common]:
            raise SystemExit(f"--pool: {', '.join(missing)} did not run on every problem in this folder")
        candidates = list(pool)
    partial = [m for m in ordered if m not in common and not m.startswith("hpo")]
    return peers, candidates, partial


def with_default(
    problems: dict[str, dict[str, list[RunFigures]]], chosen: dict[str, str]
) -> dict[str, dict[str, list[RunFigures]]]:
    """Each problem's runs plus the held-out default (the candidate chosen without it), the shipped default and the
    default before (where it ran: the 400-seed runs leave it out)."""
    return {
        name: {
            **runs,
            DEFAULT: runs[chosen[name]],
            SHIPPED_LABEL: runs[SHIPPED],
            **({BEFORE: runs[CURRENT]} if CURRENT in runs else {}),
        }
        for name, runs in problems.items()
    }


def ours_shown(problems: dict[str, dict[str, list[RunFigures]]]) -> list[str]:
    """hpo's rows: the default before issue 36 where every problem ran it, what ships, the held-out default."""
    before = all(CURRENT in runs for runs in problems.values())
    return [*([BEFORE] if before else []), SHIPPED_LABEL, DEFAULT]


def regret_table(table: dict[str, dict[str, list[RunFigures]]], methods: list[str]) -> list[str]:
    """A peer run on only some problems is ranked among the methods there and averaged over those (its count)."""
    lines = header(["problem", *methods])
    ranks = {name: heldout.ranks(runs, [m for m in methods if m in runs]) for name, runs in table.items()}
    for name, runs in table.items():
        cells = [
            f"{heldout.mean_regret(runs[m]):.3f} ({ranks[name][m]:g})" if m in runs else "-" for m in methods
        ]
        lines.append(row([name, *cells]))
    average = {m: [ranks[n][m] for n in table if m in ranks[n]] for m in methods}
    means = {m: float(np.mean(v)) for m, v in average.items()}
    best = min(means[m] for m in methods if len(average[m]) == len(table))
    cells = [
        bold(f"{means[m]:.2f}", means[m] == best)
        + ("" if len(average[m]) == len(table) else f" (of {len(average[m])})")
        for m in methods
    ]
    lines.append(row(["**average rank**", *cells]))
    return lines


def time_table(
    table: dict[str, dict[str, list[RunFigures]]], methods: list[str], quantile: float
) -> list[str]:
    lines = header(["problem", *methods])
    for name, runs in table.items():
        spreads = {m: Spread.of([r.to_target[quantile] for r in runs[m]]) for m in methods if m in runs}
        fastest = min(s.median for s in spreads.values())
        cells = [
            bold(time_cell(spreads[m]), spreads[m].median == fastest) if m in spreads else "-"
            for m in methods
        ]
        lines.append(row([name, *cells]))
    return lines


def ratio_table(
    table: dict[str, dict[str, list[RunFigures]]],
    peers: list[str],
    chosen: dict[str, str],
    maximize: dict[str, bool],
) -> list[str]:
    """Against the best of `peers` and of the other peers that ran this problem on enough seeds."""
    lines = header(["problem", *[f"q{round(q * 100)}" for q in QUANTILES], "final best (peer's)", "chosen"])
    for name, runs in table.items():
        others = [
            m for m in runs if not m.startswith("hpo") and m not in (DEFAULT, BEFORE) and m not in peers
        ]
        here = peers + [m for m in others if len(runs[m]) >= RATIO_MIN_SEEDS]
        cells = [quantile_ratio(runs, here, q) for q in QUANTILES]
        ours = heldout.mean_final(runs[DEFAULT])
        direction = 1.0 if maximize[name] else -1.0
        peer, theirs = max(
            ((p, heldout.mean_final(runs[p])) for p in here), key=lambda item: direction * item[1]
        )
        cells.append(f"{ours:.4f} ({theirs:.4f}, {peer})")
        lines.append(row([name, *cells, chosen[name].removeprefix("hpo: ")]))
    return lines


def quantile_ratio(runs: dict[str, list[RunFigures]], peers: list[str], quantile: float) -> str:
    ours = Spread.of([r.to_target[quantile] for r in runs[DEFAULT]]).median
    name, best = min(
        ((p, Spread.of([r.to_target[quantile] for r in runs[p]]).median) for p in peers), key=lambda x: x[1]
    )
    if not math.isfinite(best):
        return "no peer" if not math.isfinite(ours) else f"only hpo ({ours:.1f} s)"
    if not math.isfinite(ours):
        return f"missed ({name} {best:.1f} s)"
    return f"{ours / best:.2f}x ({name})"


def time_cell(spread: Spread) -> str:
    text = "-" if not math.isfinite(spread.median) else f"{spread.median:.1f}"
    return f"{text} ({spread.reached})"


def header(columns: list[str]) -> list[str]:
    return [row(columns), "|" + "---|" * len(columns)]


def row(cells: list[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def bold(text: str, yes: bool) -> str:
    return f"**{text}**" if yes else text


def judges_of(problems: dict[str, dict[str, list[RunFigures]]], peers: list[str]) -> list[str]:
    """The best peer of a ratio is taken among peers run on enough seeds: the minimum of many medians, some over 3
    seeds, would pick the luckiest (the model-based peers, slow to run, have few seeds; they are still ranked)."""
    return [p for p in peers if min(len(problems[n][p]) for n in problems) >= RATIO_MIN_SEEDS]


def require_candidates(problems: dict[str, dict[str, list[RunFigures]]], candidates: list[str]) -> None:
    """The rule needs candidates to choose among: runs of what ships and the peers only (round 10) hold none."""
    if candidates:
        return
    common = set.intersection(*(set(runs) for runs in problems.values()))
    held = sorted(m for m in common if m.startswith("hpo"))
    raise NoCandidates(
        "no candidate for the held-out rule in these runs (rounds 1-3's run on every problem); "
        f"name them with --pool (these runs hold {', '.join(held) or 'no hpo method'}), "
        "or use --intervals for what ships against the peers"
    )


def rule_pick(folder: Path, with_explored: bool = False) -> str:
    """The candidate the held-out rule picks on every problem in `folder` (what it would ship)."""
    problems, budgets, _ = gather(folder)
    peers, candidates, _ = split(problems, with_explored)
    return heldout.choose(problems, budgets, candidates, judges_of(problems, peers))


def report(
    folder: Path, fresh: Path | None = None, with_explored: bool = False, pool: list[str] | None = None
) -> str:
    problems, budgets, maximize = gather(folder)
    peers, candidates, partial = split(problems, with_explored, pool)
    require_candidates(problems, candidates)
    judges = judges_of(problems, peers)
    pick = heldout.choose(problems, budgets, candidates, judges)
    chosen = heldout.leave_one_out(problems, budgets, candidates, judges)
    table = with_default(problems, chosen)
    methods = [*peers, *partial, *ours_shown(problems)]
    seeds = {len(runs[m]) for runs in problems.values() for m in runs}
    lines = [
        f"{len(problems)} problems, seeds per method {sorted(seeds)}; the rule's pick on all problems: "
        f"{pick}; ratios against the best of "
        f"{', '.join(judges)} (peers on at least {RATIO_MIN_SEEDS} seeds)",
        "",
        "Normalised regret over time, mean over seeds (rank on the problem); lower is better:",
        "",
        *regret_table(table, methods),
        "",
        "Median time to the 95th percentile of the recorded final scores, simulated seconds (seeds that reached it):",
        "",
        *time_table(table, methods, 0.95),
        "",
        "hpo's default (held out) against the best peer, median times; final best, mean over seeds:",
        "",
        *ratio_table(table, judges, chosen, maximize),
        "",
        "Candidates on all problems (worst ratio to the best peer; average regret rank among the candidates):",
        "",
        *candidate_lines(problems, budgets, candidates, judges),
        *([] if with_explored or pool else explored_lines(problems, budgets, judges)),
        *(share_lines(problems, budgets, candidates, judges) if pool else []),
        "",
        "Each peer and hpo's default against the best of the *other* peers (what a 1.2x bar asks of any method):",
        "",
        *envelope_lines(table, budgets, judges),
        *interval_lines(table, budgets, judges),
        *in_place_lines(table, methods, budgets, judges, maximize),
        *final_lines(table, methods, regret_scales(folder), judges),
        *exhaustion_lines(table, methods, stored_field(folder, "configurations")),
    ]
    if fresh is not None:
        lines += ["", *fresh_lines(fresh, pick, len(problems))]
    return "\n".join(lines)


def fresh_lines(folder: Path, pick: str, suite_size: int) -> list[str]:
    """The fresh set's tables: hpo's default there is `pick`, the rule's choice on the whole suite, so every figure is
    held out; the shipped default and the default before beside it."""
    problems, budgets, maximize = gather(folder)
    peers, _, partial = split(problems)
    judges = judges_of(problems, peers)
    table = with_default(problems, dict.fromkeys(problems, pick))
    methods = [*peers, *partial, *ours_shown(problems)]
    return [
        f"**Fresh set**: {len(problems)} problems ({', '.join(problems)}) made after the candidates and the rule "
        f"were fixed; {DEFAULT} = the rule's pick on the suite's {suite_size} problems: {pick.removeprefix('hpo: ')}; "
        f"{SHIPPED_LABEL} = {SHIPPED.removeprefix('hpo: ')}",
        "",
        "Normalised regret over time, mean over seeds (rank on the problem):",
        "",
        *regret_table(table, methods),
        "",
        "Median time to the 95th percentile, simulated seconds (seeds that reached it):",
        "",
        *time_table(table, methods, 0.95),
        "",
        "The rule's pick against the best peer, median times; final best, mean over seeds:",
        "",
        *ratio_table(table, judges, {name: pick for name in problems}, maximize),
        "",
        "Each peer and the rule's pick against the best of the *other* peers:",
        "",
        *envelope_lines(table, budgets, judges),
        *in_place_lines(table, methods, budgets, judges, maximize),
        *final_lines(table, methods, regret_scales(folder), judges),
        *exhaustion_lines(table, methods, stored_field(folder, "configurations")),
    ]


def candidate_lines(
    problems: dict[str, dict[str, list[RunFigures]]],
    budgets: dict[str, float],
    candidates: list[str],
    peers: list[str],
) -> list[str]:
    lines = header(
        ["candidate", "worst ratio", "on", "average rank among candidates", "among candidates and peers"]
    )
    ranks = {name: heldout.ranks(runs, candidates) for name, runs in problems.items()}
    beside = {name: heldout.ranks(runs, [*candidates, *peers]) for name, runs in problems.items()}
    for c in candidates:
        worst = max(problems, key=lambda n: heldout.ratio(problems[n], c, peers, budgets[n]))
        value = heldout.ratio(problems[worst], c, peers, budgets[worst])
        average = float(np.mean([ranks[n][c] for n in problems]))
        with_peers = float(np.mean([beside[n][c] for n in problems]))
        lines.append(
            row([c.removeprefix("hpo: "), f"{value:.2f}", worst, f"{average:.2f}", f"{with_peers:.2f}"])
        )
    return lines


def share_lines(
    problems: dict[str, dict[str, list[RunFigures]]],
    budgets: dict[str, float],
    candidates: list[str],
    judges: list[str],
) -> list[str]:
    """How often the rule picks each candidate when the seeds are drawn again (heldout.pick_shares): whether the
    seeds tell them apart."""
    shares = heldout.pick_shares(problems, budgets, candidates, judges)
    return [
        "",
        "How often each is the rule's pick when every method's seeds are drawn again (200 draws, with replacement):",
        "",
        *header(["candidate", "picked"]),
        *(row([c.removeprefix("hpo: "), f"{share:.0%}"]) for c, share in shares.items()),
    ]


def explored_lines(
    problems: dict[str, dict[str, list[RunFigures]]], budgets: dict[str, float], judges: list[str]
) -> list[str]:
    """Rounds 4-6 (run on every problem, outside the rule's pool) beside what ships: each one's ratio to the best
    peer (heldout.ratio), worst and geometric mean, and on how many problems it is over 1.2x."""
    explored = [m for m in EXPLORED if all(m in runs for runs in problems.values())]
    if not explored:
        return []
    lines = [
        "",
        "Rounds 4-6, outside the rule's pool (`--with-explored` puts them in), beside what ships:",
        "",
        *header(["method", "worst ratio", "on", "problems over 1.2x", "geometric mean ratio"]),
    ]
    for method in [SHIPPED, *sorted(explored)]:
        ratios = {n: heldout.ratio(runs, method, judges, budgets[n]) for n, runs in problems.items()}
        worst = max(ratios, key=ratios.__getitem__)
        over = sum(r > 1.2 for r in ratios.values())
        mean = float(np.exp(np.mean(np.log(list(ratios.values())))))
        label = SHIPPED_LABEL if method == SHIPPED else method.removeprefix("hpo: ")
        lines.append(row([label, f"{ratios[worst]:.2f}", worst, f"{over} of {len(ratios)}", f"{mean:.2f}"]))
    return lines


def interval_lines(
    table: dict[str, dict[str, list[RunFigures]]],
    budgets: dict[str, float],
    judges: list[str],
    method: str = SHIPPED_LABEL,
) -> list[str]:
    """What ships against the best peer to q95, with a 90% bootstrap interval over seeds (heldout.time_ratio_interval):
    where the 1.2x bar is missed beyond the noise of the seeds, and where within it."""
    lines = [
        "",
        f"{SHIPPED_LABEL} against the best peer, median time to q95, with a 90% bootstrap interval over seeds:",
        "",
        *header(["problem", "best peer", "ratio", "90% interval", "over 1.2x"]),
    ]
    for name, runs in table.items():
        best, point, low, high = heldout.time_ratio_interval(runs, method, judges, budgets[name])
        verdict = (
            "yes, the whole interval"
            if low > 1.2
            else ("the median, not the interval" if point > 1.2 else "no")
        )
        lines.append(row([name, best, f"{point:.2f}x", f"{low:.2f}-{high:.2f}", verdict]))
    return lines


def intervals(folder: Path) -> str:
    """The interval table alone, for a folder holding what ships and any peers (every problem's own seeds)."""
    problems, budgets, _ = gather(folder)
    peers, _, partial = split(problems)
    seeds = sorted({len(runs[SHIPPED]) for runs in problems.values()})
    lines = interval_lines(problems, budgets, [*peers, *partial], SHIPPED)
    return "\n".join(
        [f"{len(problems)} problems, {seeds} seeds; peers: {', '.join([*peers, *partial])}", *lines]
    )


def envelope_lines(
    table: dict[str, dict[str, list[RunFigures]]], budgets: dict[str, float], judges: list[str]
) -> list[str]:
    """Each judge's ratio to the best of the other judges, and the held-out default's and the shipped one's to the
    best of all of them: how far the best method in the field is from the envelope the issue's bar is drawn against."""
    lines = header(["method", "worst ratio", "on", "problems over 1.2x", "geometric mean ratio"])
    ours = [m for m in (SHIPPED_LABEL, DEFAULT) if all(m in runs for runs in table.values())]
    for method in [*judges, *ours]:
        others = [j for j in judges if j != method]
        ratios = {n: heldout.ratio(runs, method, others, budgets[n]) for n, runs in table.items()}
        worst = max(ratios, key=ratios.__getitem__)
        over = sum(r > 1.2 for r in ratios.values())
        mean = float(np.exp(np.mean(np.log(list(ratios.values())))))
        label = method.removeprefix("hpo: ")
        lines.append(row([label, f"{ratios[worst]:.2f}", worst, f"{over} of {len(ratios)}", f"{mean:.2f}"]))
    return lines


def in_place_lines(
    table: dict[str, dict[str, list[RunFigures]]],
    methods: list[str],
    budgets: dict[str, float],
    judges: list[str],
    maximize: dict[str, bool],
) -> list[str]:
    """A study that names no pruner, ranked in the shipped column's place (the other columns' ranks unchanged),
    beside the shipped default: the cost of its start-up (no trial stopped before two have completed) where time
    buys configurations. Nothing when it was not run on every problem."""
    if not all(NO_PRUNER_NAMED in runs for runs in table.values()):
        return []
    lines = [
        "",
        f"{NO_PRUNER_LABEL} (stop-type rungs, none before two trials have completed) in {SHIPPED_LABEL}'s place:",
        "",
        *header(
            [
                "method",
                "average rank",
                "worst ratio",
                "on",
                "over 1.2x",
                "final best no worse than the best peer's",
            ]
        ),
    ]
    for label, source in ((SHIPPED_LABEL, SHIPPED), (NO_PRUNER_LABEL, NO_PRUNER_NAMED)):
        swapped = {n: {**runs, SHIPPED_LABEL: runs[source]} for n, runs in table.items()}
        ranks = [
            heldout.ranks(runs, [m for m in methods if m in runs])[SHIPPED_LABEL] for runs in swapped.values()
        ]
        ratios = {n: heldout.ratio(runs, SHIPPED_LABEL, judges, budgets[n]) for n, runs in swapped.items()}
        worst = max(ratios, key=ratios.__getitem__)
        no_worse = sum(
            final_no_worse(runs, SHIPPED_LABEL, judges, maximize[n]) for n, runs in swapped.items()
        )
        lines.append(
            row(
                [
                    label,
                    f"{np.mean(ranks):.2f}",
                    f"{ratios[worst]:.2f}",
                    worst,
                    f"{sum(r > 1.2 for r in ratios.values())} of {len(ratios)}",
                    f"{no_worse} of {len(ratios)}",
                ]
            )
        )
    return lines


def stored_field(folder: Path, key: str) -> dict[str, Any]:
    """One field of each problem's stored runs (suite.py's `save`), by problem."""
    return {
        stored["problem"]: stored[key]
        for stored in map(json.loads, map(Path.read_text, folder.glob("*.json")))
    }


def regret_scales(folder: Path) -> dict[str, tuple[float, float]]:
    """Each problem's (best, median) recorded final score: the ends of its normalised regret."""
    return {name: tuple(scale) for name, scale in stored_field(folder, "regret_scale").items()}


def exhaustion_lines(
    table: dict[str, dict[str, list[RunFigures]]], methods: list[str], configurations: dict[str, int]
) -> list[str]:
    """Where a method's runs start every recorded configuration. The simulator gives each configuration once per run
    (recording.py's `nearest`), so such a run has surely started the best one, which a search of the real, continuous
    space never has: a recording with fewer configurations than a method starts flatters that method."""
    lines = [
        "",
        "Runs that start every recorded configuration (and so, surely, the best one), by method: the problems where "
        "most of its runs do:",
        "",
        *header(["method", "problems", "which (share of runs)"]),
    ]
    for m in methods:
        shares = {
            n: float(np.mean([f.trials >= configurations[n] for f in runs[m]]))
            for n, runs in table.items()
            if m in runs
        }
        most = [n for n, share in shares.items() if share > 0.5]
        which = ", ".join(f"{n} ({shares[n]:.2f})" for n in most) or "none"
        lines.append(row([m.removeprefix("hpo: "), f"{len(most)} of {len(shares)}", which]))
    return lines


def final_regret(runs: list[RunFigures], scale: tuple[float, float]) -> float:
    """The final best's distance from the best recorded configuration, in units of (best - median): 0 is the best,
    1 the median configuration; the same sign whether the metric is maximised or minimised."""
    best, median = scale
    return (best - heldout.mean_final(runs)) / (best - median)


def final_lines(
    table: dict[str, dict[str, list[RunFigures]]],
    methods: list[str],
    scales: dict[str, tuple[float, float]],
    judges: list[str],
) -> list[str]:
    """Each method's final best over all problems at once: the issue asks for a final best no worse than the best
    peer's on average, and problems in loss and accuracy only average once each is put in its own units. A peer run
    on only some problems has no such average and is left out."""
    methods = [m for m in methods if all(m in runs for runs in table.values())]
    finals = {m: [final_regret(runs[m], scales[n]) for n, runs in table.items()] for m in methods}
    averages = {m: float(np.mean(v)) for m, v in finals.items()}
    best_peer = min(judges, key=averages.__getitem__)
    lines = [
        "",
        "Final best, normalised (0: the best recorded configuration, 1: the median one), mean over seeds, then over "
        f"problems; the best peer on average: {best_peer.removeprefix('hpo: ')}:",
        "",
        *header(["method", "mean over problems", "worst problem", f"problems no worse than {best_peer}"]),
    ]
    for m in sorted(methods, key=averages.__getitem__):
        worst = int(np.argmax(finals[m]))
        no_worse = sum(a <= b for a, b in zip(finals[m], finals[best_peer], strict=True))
        cells = [
            f"{averages[m]:.3f}",
            f"{finals[m][worst]:.3f} ({list(table)[worst]})",
            f"{no_worse} of {len(table)}",
        ]
        lines.append(row([m.removeprefix("hpo: "), *cells]))
    return lines


def final_no_worse(runs: dict[str, list[RunFigures]], method: str, judges: list[str], maximize: bool) -> bool:
    """Whether `method`'s final best (mean over seeds) is at least the best judge's."""
    direction = 1.0 if maximize else -1.0
    ours = direction * heldout.mean_final(runs[method])
    return all(ours >= direction * heldout.mean_final(runs[j]) for j in judges)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=Path, default=OUT)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--fresh", type=Path, help="the fresh set's runs (suite.py --fresh writes runs/fresh)"
    )
    parser.add_argument(
        "--with-explored",
        action="store_true",
        help="put rounds 4-6 (candidates.EXPLORED) in the held-out rule's pool",
    )
    parser.add_argument(
        "--pool",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        help="comma-separated: the held-out rule's candidates (default: rounds 1-3's, in every folder's runs)",
    )
    parser.add_argument(
        "--intervals",
        action="store_true",
        help="only the interval table, for runs of what ships and some peers (e.g. more seeds on a few problems)",
    )
    options = parser.parse_args()
    try:
        text = (
            intervals(options.runs)
            if options.intervals
            else report(options.runs, options.fresh, options.with_explored, options.pool)
        )
    except NoCandidates as error:
        parser.error(str(error))
    print(text)
    if options.out:
        options.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
