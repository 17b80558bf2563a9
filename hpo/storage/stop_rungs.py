"""Stop-type ASHA rungs placed as fractions of each trial's length: `scheduler: {type: asha}` (mode stop).

Optuna's successive halving (asynchronous: a trial is judged against every trial that reached its rung before it)
needs its first rung in the unit of the reports, global steps. A study file that trains by `num_train_epochs` does
not know its length in steps until the data is loaded, and a study that searches the batch size has a different
length in each trial. So the trial writes its own length (`LENGTH_ATTR`, in global steps, hpo.trial.pruning) with
its first report, and this pruner puts its first rung at the trial's first evaluation at or past `first_fraction` of
that length, each next one `reduction_factor` times further, and asks Optuna's pruner there. Every trial is judged at
the same fraction of its training, whatever its step count.

A trial whose length the storage does not have yet (its write was kept through an outage) is not pruned until it has.
"""

from __future__ import annotations

import math

import optuna
from optuna.pruners import BasePruner, SuccessiveHalvingPruner
from optuna.trial import FrozenTrial

LENGTH_ATTR = "max_steps"  # user attribute: the trial's full length in global steps, the unit of its reports


class StopRungsPruner(BasePruner):
    def __init__(self, first_fraction: float, reduction_factor: int) -> None:
        if not 0 < first_fraction < 1:
            raise ValueError(f"first_fraction must be in (0, 1), got {first_fraction}")
        self.first_fraction = first_fraction
        self.reduction_factor = reduction_factor

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        first = self.first_rung(trial)
        if first is None:
            return False
        return SuccessiveHalvingPruner(min_resource=first, reduction_factor=self.reduction_factor).prune(
            study, trial
        )

    def first_rung(self, trial: FrozenTrial) -> int | None:
        """The trial's first reported step at or past `first_fraction` of its length; None before it (or without
        a length). Trials that evaluate at the same fractions of their length get the same first rung."""
        length = trial.user_attrs.get(LENGTH_ATTR)
        if not isinstance(length, int | float) or length <= 0:
            return None
        floor = max(1, math.ceil(length * self.first_fraction))
        return min((step for step in trial.intermediate_values if step >= floor), default=None)
