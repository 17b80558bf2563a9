"""BOHB's hedge against its own model: a share of the trials drawn at random, the rest by the study's sampler.

Why: on the suite the multi-fidelity TPE under aggressive rungs is behind random search under the same rungs where low
fidelities mislead the model (synth-optim, friedman), while it leads elsewhere. BOHB (Falkner et al., 2018) draws a
third of its configurations at random so that a wrong model costs at most that third. Which trials are random is a
function of the seed and the trial's number, so the workers of one study agree and a rerun draws the same.

Result (docs/benchmarks.md, "Rounds 4-5"): behind the model alone; over 1.2x the best peer on 9 of 13 problems
against 6.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler, RandomSampler
from optuna.trial import FrozenTrial, TrialState


class RandomShareSampler(BaseSampler):
    def __init__(self, model: BaseSampler, share: float, seed: int | None) -> None:
        self.model, self.share, self.seed = model, share, seed or 0
        self.random = RandomSampler(seed=seed)

    def is_random(self, trial: FrozenTrial) -> bool:
        return float(np.random.default_rng([self.seed, trial.number]).random()) < self.share

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return {} if self.is_random(trial) else self.model.infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return {} if self.is_random(trial) else self.model.sample_relative(study, trial, search_space)

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        sampler = self.random if self.is_random(trial) else self.model
        return sampler.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.model.before_trial(study, trial)

    def after_trial(
        self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: list[float] | None
    ) -> None:
        self.model.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.model.reseed_rng()
        self.random.reseed_rng()
