"""BOHB's hedge against its own model: a share of the trials drawn at random, the rest by the study's sampler.

Why: on the suite the multi-fidelity TPE under aggressive rungs is behind random search under the same rungs where low
fidelities mislead the model (synth-optim, friedman), while it leads elsewhere. BOHB (Falkner et al., 2018) draws a
third of its configurations at random so that a wrong model costs at most that third. Which trials are random is a
function of the seed and the trial's number, so the workers of one study agree and a rerun draws the same.

Result (docs/search-rounds.md, "Rounds 4-5"): behind the model alone; over 1.2x the best peer on 9 of 13 problems
against 6.
"""

from __future__ import annotations

import numpy as np
import optuna
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial

from bench.search.model_or_random import ModelOrRandom


class RandomShareSampler(ModelOrRandom):
    def __init__(self, model: BaseSampler, share: float, seed: int | None) -> None:
        super().__init__(model, seed)
        self.share, self.seed = share, seed or 0

    def is_random(self, trial: FrozenTrial) -> bool:
        return float(np.random.default_rng([self.seed, trial.number]).random()) < self.share

    def pick(self, study: optuna.Study, trial: FrozenTrial) -> BaseSampler:
        return self.random if self.is_random(trial) else self.model
