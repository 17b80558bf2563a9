"""Stop-type rungs whose first rung moves to where the study's own completed trials show early values ranking final
ones: a candidate for `scheduler: {type: asha}` (issue 36), judged in bench/search before it is offered.

Why: where the first rung belongs is a property of the problem. On bench/search's suite a rung at the first
evaluation wins where curves rank early (a CNN, Friedman's regression) and loses most where they cross late (an MLP
under a cosine schedule), a rung at a ninth of the length loses a little everywhere. The study can see which case it is
in once a few trials have completed: their values at each fraction of the length against their final scores.

The rule, at each report of a trial whose length (`LENGTH_ATTR`, global steps) is known:
- the first rung's fraction: `start_fraction` until `min_pairs` trials have completed; then the smallest of
  `fractions` at which the completed trials' values rank their final scores with a Spearman correlation of at least
  `min_correlation`, or the largest of them when none does (0.0 is the trial's first evaluation);
- the rungs: the trial's first report at or past that fraction of its length, then `reduction_factor` times further;
- at a report that is the first at or past a rung, the trial is stopped unless its value is among the best
  max(1, n // reduction_factor) of the n trials (itself included) that reported at or past that fraction of their
  length (their value at their first such report), as Optuna's successive halving judges a rung.
Values are compared at the same fraction of each trial's length, so a rung that moves needs no bookkeeping: what a
trial reported is all the rule reads.

Result (docs/search-rounds.md, "Rounds 4-5"): within a few percent of the fixed rung at a ninth on every problem; too few
trials complete before the study has found its good models for the rung to move in time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import optuna
from optuna.pruners import BasePruner
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from hpo.scheduling.rank_gate import spearman
from hpo.storage.stop_rungs import LENGTH_ATTR

FRACTIONS = (0.0, 1 / 27, 1 / 9, 1 / 3)


class AdaptiveRungsPruner(BasePruner):
    def __init__(
        self,
        reduction_factor: int = 2,
        fractions: Sequence[float] = FRACTIONS,
        start_fraction: float = 1 / 9,
        min_pairs: int = 4,
        min_correlation: float = 0.7,
    ) -> None:
        self.reduction_factor = reduction_factor
        self.fractions = tuple(sorted(fractions))
        self.start_fraction = start_fraction
        self.min_pairs = min_pairs
        self.min_correlation = min_correlation
        self._chosen: dict[tuple[int, int], float] = {}  # (study id, completed trials) -> fraction

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        length = trial_length(trial)
        steps = sorted(trial.intermediate_values)
        if length is None or not steps:
            return False
        trials = study.get_trials(deepcopy=False)
        first_fraction, reduction_factor = self.schedule(study, trials)
        first = first_report_at(trial, length, first_fraction)
        if first is None:
            return False
        rung = rung_crossed(steps, first, reduction_factor)
        if rung is None:
            return False
        fraction = rung / length
        values = [at_fraction(t, fraction) for t in trials if t.number != trial.number]
        others = [v for v in values if v is not None]
        mine = trial.intermediate_values[steps[-1]]
        return not self.goes_on(mine, others, reduction_factor, study.direction)

    def goes_on(
        self, value: float, others: list[float], reduction_factor: int, direction: StudyDirection
    ) -> bool:
        """Whether a trial with `value` at a rung passes it, against the others' values there."""
        return among_best(value, others, reduction_factor, direction)

    def schedule(self, study: optuna.Study, trials: list[FrozenTrial]) -> tuple[float, int]:
        """(the first rung's fraction of the length, the reduction factor) as the study's trials stand."""
        return self.first_fraction(study, trials), self.reduction_factor

    def first_fraction(self, study: optuna.Study, trials: list[FrozenTrial]) -> float:
        completed = [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None]
        if len(completed) < self.min_pairs:
            return self.start_fraction
        key = (study._study_id, len(completed))  # noqa: SLF001 - the id tells studies sharing one pruner apart
        if key not in self._chosen:
            self._chosen[key] = self.ranking_fraction(completed)
        return self._chosen[key]

    def ranking_fraction(self, completed: list[FrozenTrial]) -> float:
        """The smallest fraction whose values rank the completed trials' final scores; the largest if none does."""
        for fraction in self.fractions:
            pairs = [
                (value, float(t.value))
                for t in completed
                if (value := at_fraction(t, fraction)) is not None and t.value is not None
            ]
            if len(pairs) >= self.min_pairs and spearman(pairs) >= self.min_correlation:
                return fraction
        return self.fractions[-1]


def rung_crossed(steps: list[int], first: int, reduction_factor: int) -> int | None:
    """The rung level the latest report is the first at or past, if any (the highest, if it passed several)."""
    latest, before = steps[-1], (steps[-2] if len(steps) > 1 else 0)
    crossed = None
    level = first
    while level <= latest:
        if level > before:
            crossed = level
        level *= reduction_factor
    return crossed


def trial_length(trial: FrozenTrial) -> int | None:
    length = trial.user_attrs.get(LENGTH_ATTR)
    return int(length) if isinstance(length, int | float) and length > 0 else None


def first_report_at(trial: FrozenTrial, length: int, fraction: float) -> int | None:
    """The trial's first reported step at or past `fraction` of its length (0.0: its first report)."""
    floor = max(1, math.ceil(length * fraction))
    return min((step for step in trial.intermediate_values if step >= floor), default=None)


def at_fraction(trial: FrozenTrial, fraction: float) -> float | None:
    """The trial's value at its first report at or past `fraction` of its length; None before it or without one."""
    length = trial_length(trial)
    if length is None:
        return None
    step = first_report_at(trial, length, fraction)
    return None if step is None else trial.intermediate_values[step]


def among_best(value: float, others: list[float], reduction_factor: int, direction: StudyDirection) -> bool:
    """Whether `value` is among the best max(1, n // reduction_factor) of itself and `others` (ties pass)."""
    return within_best(value, others, lambda n: max(1, n // reduction_factor), direction)


def within_best(
    value: float, others: list[float], kept: Callable[[int], int], direction: StudyDirection
) -> bool:
    """Whether `value` is among the best kept(n) of the n values of itself and `others` (ties pass; NaN never)."""
    if math.isnan(value):
        return False
    pool = sorted([value, *[v for v in others if not math.isnan(v)]])
    if direction == StudyDirection.MAXIMIZE:
        pool.reverse()
    cutoff = pool[kept(len(pool)) - 1]
    return value >= cutoff if direction == StudyDirection.MAXIMIZE else value <= cutoff
