"""A sampler that draws each trial either from the study's sampler (the model) or at random: the base of rounds 4-5's
hedges (random_share.py: a fixed share of the trials; early_ranks.py: every trial once early values rank)."""

from __future__ import annotations

import abc
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler, RandomSampler
from optuna.trial import FrozenTrial, TrialState


class ModelOrRandom(BaseSampler):
    def __init__(self, model: BaseSampler, seed: int | None) -> None:
        self.model, self.random = model, RandomSampler(seed=seed)

    @abc.abstractmethod
    def pick(self, study: optuna.Study, trial: FrozenTrial) -> BaseSampler:
        """The sampler that draws `trial`: the same one for all of its parameters."""

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return self.pick(study, trial).infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return self.pick(study, trial).sample_relative(study, trial, search_space)

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        return self.pick(study, trial).sample_independent(study, trial, param_name, param_distribution)

    # The model sees every trial start and end, whoever drew it (TPE keeps nothing, but a model with state would).
    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.model.before_trial(study, trial)

    def after_trial(
        self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: list[float] | None
    ) -> None:
        self.model.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.model.reseed_rng()
        self.random.reseed_rng()
