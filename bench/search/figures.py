"""What a run of a method is judged on, and how seeds are summarised.

Per run (one method, one seed): the time until the best-so-far value (every evaluation of every trial counts, as in
bench/pause/asha.py: the value was seen, and its checkpoint kept under `save_strategy: best`) first reaches each target;
the best-so-far at 1/4, 1/2 and all of the wall budget; the worker-seconds spent; the normalised regret over time
(`regret_auc`): the area under the anytime curve max(0, min(1, (best - best-so-far) / (best - reference))), over
the budget, where `best` is the best recorded final score and `reference` the median one (1 until the first
evaluation; 0 is the best configuration from the first second, 1 never better than a median configuration). Over seeds: the median and the
interquartile range; a target a run never reached counts as infinitely late, so a median is finite only when more
than half the seeds reached it, and the table says how many did.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bench.search.recording import Recording
from bench.search.simulate import Outcome

QUANTILES = (0.9, 0.95, 0.99)  # targets: these quantiles of the recorded configurations' final scores
FRACTIONS = (0.25, 0.5, 1.0)  # of the wall budget


@dataclass(frozen=True)
class RunFigures:
    to_target: dict[float, float]  # quantile -> seconds (inf: not reached)
    best_at: dict[float, float]  # fraction of the budget -> best-so-far (nan: nothing evaluated yet)
    compute_s: float
    trials: int
    resumes: int
    evaluations: int
    regret_auc: float = math.nan  # normalised regret over time (nan: no scale given)


def run_figures(
    outcome: Outcome,
    targets: dict[float, float],
    budget_s: float,
    maximize: bool,
    scale: tuple[float, float] | None = None,
) -> RunFigures:
    """`scale`: (best, reference) recorded final scores for the normalised regret (Recording.regret_scale)."""
    sign = 1.0 if maximize else -1.0
    times = np.array([t for t, _ in outcome.trace])
    best = (
        np.maximum.accumulate(np.array([sign * v for _, v in outcome.trace]))
        if outcome.trace
        else np.array([])
    )
    to_target = {}
    for q, target in targets.items():
        reached = np.flatnonzero(best >= sign * target)
        to_target[q] = float(times[reached[0]]) if len(reached) else math.inf
    best_at = {}
    for fraction in FRACTIONS:
        seen = np.flatnonzero(times <= fraction * budget_s)
        best_at[fraction] = float(sign * best[seen[-1]]) if len(seen) else math.nan
    regret = regret_area(times, sign * best, budget_s, maximize, scale) if scale else math.nan
    return RunFigures(
        to_target, best_at, outcome.busy_s, len(outcome.trials), outcome.resumes, outcome.trial_steps, regret
    )


def regret_area(
    times: np.ndarray, best: np.ndarray, budget_s: float, maximize: bool, scale: tuple[float, float]
) -> float:
    """The mean over [0, budget] of the normalised regret of the best-so-far `best` (a step function of `times`)."""
    top, reference = scale
    span = (top - reference) if maximize else (reference - top)
    if span <= 0:
        return math.nan
    gap = (top - best) if maximize else (best - top)
    regret = np.clip(gap / span, 0.0, 1.0)
    inside = times <= budget_s
    edges = np.concatenate([[0.0], times[inside], [budget_s]])
    levels = np.concatenate([[1.0], regret[inside]])
    return float(np.sum(np.diff(edges) * levels) / budget_s)


@dataclass(frozen=True)
class Spread:
    median: float
    low: float  # 25th percentile
    high: float  # 75th percentile
    reached: int  # finite values (for times to target: the seeds that reached it)
    runs: int

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        array = np.array(values, dtype=float)
        # inf sorts last, so a percentile over it is inf when that many runs missed; nan (no value) is left out.
        array = array[~np.isnan(array)]
        if len(array) == 0:
            return cls(math.nan, math.nan, math.nan, 0, len(values))
        low, median, high = np.percentile(array, [25, 50, 75], method="lower")
        return cls(float(median), float(low), float(high), int(np.isfinite(array).sum()), len(values))


def summarise(runs: list[RunFigures]) -> dict[str, Spread]:
    """One Spread per figure, keyed as the table names them."""
    figures = {f"to_q{round(q * 100)}_s": Spread.of([r.to_target[q] for r in runs]) for q in QUANTILES}
    figures |= {f"best_at_{f:g}": Spread.of([r.best_at[f] for r in runs]) for f in FRACTIONS}
    figures["compute_s"] = Spread.of([r.compute_s for r in runs])
    figures["regret_auc"] = Spread.of([r.regret_auc for r in runs])
    figures["trials"] = Spread.of([float(r.trials) for r in runs])
    figures["resumes"] = Spread.of([float(r.resumes) for r in runs])
    return figures


def figures_row(outcome: Outcome, recording: Recording, budget_s: float, trials: int) -> dict[str, float]:
    """One run's figures as real.py and agreement.py tabulate them ({"to_q95_s": ..., "best_at_1": ..., "trials"}),
    `trials` counted by the caller (a real run counts those started within the budget)."""
    targets = {q: recording.target(q) for q in QUANTILES}
    figures = run_figures(outcome, targets, budget_s, recording.maximize, recording.regret_scale())
    row = {f"to_q{round(q * 100)}_s": figures.to_target[q] for q in QUANTILES}
    row |= {f"best_at_{f:g}": figures.best_at[f] for f in FRACTIONS}
    row["trials"] = trials
    return row
