"""Held-out selection of hpo's default, and the suite's ranks: pure functions of per-problem summaries.

A summary is {method: {figure: Spread}} for one problem (figures.summarise). The protocol:
- every method runs on every problem, the same seeds;
- the normalised regret over time (`regret_auc`, mean over seeds) ranks the methods on each problem (1 = best, ties
  share the mean rank); the average rank is over problems;
- hpo's default is chosen among `candidates` by leave-one-problem-out: for each problem, the candidate with the
  smallest worst ratio to the best peer over the *other* problems (`worst_ratio`) is picked, and its figures on the
  held-out problem are the default's there. A candidate is thus never judged on a problem it was chosen on.

The ratio of a candidate on a problem is the larger of two: its median time to the 95th percentile over the best
peer's (a seed that never reached it counts as twice the budget), and its mean normalised regret over the best peer's.
The first is the issue's target (a good model as early as the most aggressive peer), the second the whole anytime
curve (so a schedule cannot buy one target with the rest of the run).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

from bench.search.figures import RunFigures

Runs = Mapping[str, list[RunFigures]]  # method -> one RunFigures per seed, for one problem
TARGET = 0.95


def median_time(runs: list[RunFigures], quantile: float, budget_s: float) -> float:
    """Median time to a target over seeds, a miss counting as twice the budget (finite, so ratios exist)."""
    return float(np.median(times_to(runs, quantile, budget_s)))


def mean_regret(runs: list[RunFigures]) -> float:
    return float(np.mean([r.regret_auc for r in runs]))


def mean_final(runs: list[RunFigures]) -> float:
    return float(np.nanmean([r.best_at[1.0] for r in runs]))


def ratio(runs: Runs, method: str, peers: Iterable[str], budget_s: float) -> float:
    """max(time to q95 / best peer's, regret / best peer's): how far the method is behind the best peer."""
    peers = [p for p in peers if p in runs]
    time_ratio = median_time(runs[method], TARGET, budget_s) / min(
        median_time(runs[p], TARGET, budget_s) for p in peers
    )
    best_regret = min(mean_regret(runs[p]) for p in peers)
    regret_ratio = mean_regret(runs[method]) / max(best_regret, 1e-3)
    return max(time_ratio, regret_ratio)


def worst_ratio(
    problems: Mapping[str, Runs], budgets: Mapping[str, float], method: str, peers: Iterable[str]
) -> float:
    return max(ratio(runs, method, peers, budgets[name]) for name, runs in problems.items())


def leave_one_out(
    problems: Mapping[str, Runs],
    budgets: Mapping[str, float],
    candidates: list[str],
    peers: Iterable[str],
) -> dict[str, str]:
    """held-out problem -> the candidate chosen on the others (ties: the earlier candidate)."""
    peers = list(peers)
    chosen = {}
    for held in problems:
        others = {name: runs for name, runs in problems.items() if name != held}
        chosen[held] = min(candidates, key=lambda c: worst_ratio(others, budgets, c, peers))
    return chosen


def choose(
    problems: Mapping[str, Runs], budgets: Mapping[str, float], candidates: list[str], peers: Iterable[str]
) -> str:
    """The candidate chosen on every problem: what ships."""
    return min(candidates, key=lambda c: worst_ratio(problems, budgets, c, list(peers)))


def ranks(runs: Runs, methods: list[str]) -> dict[str, float]:
    """Rank of each method on one problem by mean normalised regret (1 = best; ties share the mean rank)."""
    scores = {m: round(mean_regret(runs[m]), 6) for m in methods}
    ordered = sorted(scores.values())
    return {
        m: float(np.mean([i + 1 for i, s in enumerate(ordered) if s == score])) for m, score in scores.items()
    }


def time_ratio_interval(
    runs: Runs, method: str, peers: Iterable[str], budget_s: float, draws: int = 1000, seed: int = 0
) -> tuple[str, float, float, float]:
    """(the best peer, the method's median time to q95 over that peer's, a 90% bootstrap interval): each draw
    resamples both methods' seeds with replacement. The best peer is the one with the smallest median, so the ratio
    is, if anything, against a lucky peer; the interval is the noise of the two medians only."""
    peers = [p for p in peers if p in runs]
    best = min(peers, key=lambda p: median_time(runs[p], TARGET, budget_s))
    mine, theirs = (np.array(times_to(runs[m], TARGET, budget_s)) for m in (method, best))
    rng = np.random.default_rng(seed)
    ratios = [
        np.median(rng.choice(mine, size=len(mine))) / np.median(rng.choice(theirs, size=len(theirs)))
        for _ in range(draws)
    ]
    low, high = np.percentile(ratios, [5, 95])
    return best, float(np.median(mine) / np.median(theirs)), float(low), float(high)


def times_to(runs: list[RunFigures], quantile: float, budget_s: float) -> list[float]:
    """Each seed's time to the target, a miss counting as twice the budget."""
    return [r.to_target[quantile] if math.isfinite(r.to_target[quantile]) else 2 * budget_s for r in runs]


def pick_shares(
    problems: Mapping[str, Runs],
    budgets: Mapping[str, float],
    candidates: list[str],
    peers: Iterable[str],
    draws: int = 200,
    seed: int = 0,
) -> dict[str, float]:
    """How often each candidate is the rule's pick (`choose`) when every method's seeds are drawn again with
    replacement on every problem: the rule takes the smallest of noisy worst ratios, and near-equal shares say the
    seeds cannot tell the candidates apart (docs/search-rounds.md, "Round 7")."""
    peers = list(peers)
    rng = np.random.default_rng(seed)
    picks = dict.fromkeys(candidates, 0)
    for _ in range(draws):
        resampled = {
            name: {m: resample(runs[m], rng) for m in [*candidates, *peers] if m in runs}
            for name, runs in problems.items()
        }
        picks[choose(resampled, budgets, candidates, peers)] += 1
    return {c: n / draws for c, n in picks.items()}


def resample(runs: list[RunFigures], rng: np.random.Generator) -> list[RunFigures]:
    return [runs[i] for i in rng.integers(0, len(runs), len(runs))]
