"""A schedule that turns to Ray Tune's recipe once the study sees its early values rank: a candidate for issue 36.

Why: on the suite Ray Tune's ASHA (random search, a rung at the first evaluation, a third kept at each rung) is the
method nearest issue 36's 1.2x bar (over it against the best other peer on 2 of 13 problems), and never reaches q95 in
most runs on digits, whose curves cross late; hpo's shipped schedule (the multi-fidelity TPE, rungs from a ninth of the length, half kept) is
never that far behind and never that close. Which recipe a problem wants shows in how well its first evaluation ranks
its values at a ninth of the length (Spearman over all 300 recorded configurations: 0.79-0.95 where Ray's recipe
leads, 0.70 on digits). Under the shipped rungs every trial reaches a ninth, so those pairs are an unbiased sample.

The rule: the shipped schedule until `pairs` trials have values at both; then, decided once for the study, Ray's
recipe if their rank correlation is at least `min_correlation` (the sampler turns to random search, or stays the
model when the method says `random: False`), else the shipped schedule on.

Result (docs/search-rounds.md, "Rounds 4-5"): it classifies the problems as meant (on 8 seeds, friedman 6 times
aggressive, digits once) but decides after most of the recipe's gain; worst ratio 1.57 against the shipped 1.53.
"""

from __future__ import annotations

import weakref
from typing import Any

import optuna
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial

from bench.search.adaptive_rungs import AdaptiveRungsPruner, first_report_at, trial_length
from bench.search.model_or_random import ModelOrRandom
from hpo.scheduling.rank_gate import spearman

NINTH = 1 / 9
# storage -> {study id: whether the early values ranked}: decided once per study, shared by its workers' objects
_DECIDED: weakref.WeakKeyDictionary[Any, dict[int, bool]] = weakref.WeakKeyDictionary()


def early_ranks_hold(study: optuna.Study, pairs: int, min_correlation: float) -> bool | None:
    """None until `pairs` trials have values at their first evaluation and at a ninth; then the decision."""
    decided = _DECIDED.setdefault(study._storage, {})  # noqa: SLF001 - the storage the study's workers share
    if study._study_id in decided:  # noqa: SLF001
        return decided[study._study_id]  # noqa: SLF001
    both = [pair for t in study.get_trials(deepcopy=False) if (pair := early_pair(t)) is not None]
    if len(both) < pairs:
        return None
    decided[study._study_id] = spearman(both[:pairs]) >= min_correlation  # noqa: SLF001
    return decided[study._study_id]  # noqa: SLF001


def early_pair(trial: FrozenTrial) -> tuple[float, float] | None:
    """(value at the first evaluation, value at a ninth) when they are two reports; None otherwise."""
    length = trial_length(trial)
    if length is None:
        return None
    first, ninth = first_report_at(trial, length, 0.0), first_report_at(trial, length, NINTH)
    if first is None or ninth is None or first == ninth:
        return None
    return trial.intermediate_values[first], trial.intermediate_values[ninth]


class EarlyRanksPruner(AdaptiveRungsPruner):
    def __init__(self, pairs: int = 10, min_correlation: float = 0.8) -> None:
        super().__init__(reduction_factor=2, fractions=(NINTH,), start_fraction=NINTH)
        self.pairs, self.min_correlation = pairs, min_correlation

    def schedule(self, study: optuna.Study, trials: list[FrozenTrial]) -> tuple[float, int]:
        aggressive = early_ranks_hold(study, self.pairs, self.min_correlation)
        return (0.0, 3) if aggressive else (NINTH, 2)


class EarlyRanksSampler(ModelOrRandom):
    """The study's sampler, or random search once the study has turned to Ray's recipe."""

    def __init__(
        self, model: BaseSampler, seed: int | None, pairs: int = 10, min_correlation: float = 0.8
    ) -> None:
        super().__init__(model, seed)
        self.pairs, self.min_correlation = pairs, min_correlation

    def pick(self, study: optuna.Study, trial: FrozenTrial | None = None) -> BaseSampler:
        return self.random if early_ranks_hold(study, self.pairs, self.min_correlation) else self.model
