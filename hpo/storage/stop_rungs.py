"""Stop-type ASHA rungs placed as fractions of each trial's length: `scheduler: {type: asha}` (mode stop).

Optuna's successive halving (asynchronous: a trial is judged against every trial that reached its rung before it)
needs its first rung in the unit of the reports, global steps. A study file that trains by `num_train_epochs` does
not know its length in steps until the data is loaded, and a study that searches the batch size has a different
length in each trial. So the trial writes its own length (`LENGTH_ATTR`, in global steps, hpo.trial.pruning) with
its first report, and this pruner puts its first rung at the trial's first evaluation at or past `first_fraction` of
that length, each next one `reduction_factor` times further, and asks Optuna's pruner there. Every trial is judged at
the same fraction of its training, whatever its step count.

A trial whose length the storage does not have yet (its write was kept through an outage) is not pruned until it has.
With `startup_trials` n, no trial is stopped before n trials have completed (what a study that names no pruner gets:
on studies of 8-15 trials, stopping from the second trial cost the best model, bench/search/small.py).

Each rung is judged with the value the trial had there. Optuna's pruner judges every rung it has not recorded with the
trial's latest value, which is a later (usually better) one when the pruner is first asked past a rung: reports that
reached the storage late (kept through an outage), or a retry that resumed from a checkpoint past a rung. So the
pruner is asked once per such rung, on a view of the trial that ends at the rung's report. A retry is a new trial
that reports only from where it resumed; it is seen with its earlier attempts' reports and rungs, so that its rungs
sit where theirs did and a rung an attempt passed is not judged (nor counted among the competitors) twice.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator

import optuna
from optuna.pruners import BasePruner, SuccessiveHalvingPruner
from optuna.trial import FrozenTrial, TrialState

from hpo.storage.attempts import REQUEUED_FROM, attempt_chain

LENGTH_ATTR = "max_steps"  # user attribute: the trial's full length in global steps, the unit of its reports
# Optuna's successive halving records rung n's value as the system attribute "completed_rung_<n>" (optuna 5.0.0, the
# lock's; a rename there breaks `with_earlier_attempts` and the chaos suite's rung check).
RUNG_KEY = "completed_rung_"


class StopRungsPruner(BasePruner):
    def __init__(self, first_fraction: float, reduction_factor: int, startup_trials: int = 0) -> None:
        if not 0 < first_fraction < 1:
            raise ValueError(f"first_fraction must be in (0, 1), got {first_fraction}")
        self.first_fraction = first_fraction
        self.reduction_factor = reduction_factor
        self.startup_trials = startup_trials

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        trial = with_earlier_attempts(study, trial)
        first = self.first_rung(trial)
        if first is None:
            return False
        halving = SuccessiveHalvingPruner(min_resource=first, reduction_factor=self.reduction_factor)
        judged = any(halving.prune(study, view) for view in self.at_pending_rungs(trial, first))
        return judged and self.past_startup(study)

    def past_startup(self, study: optuna.Study) -> bool:
        """Whether `startup_trials` trials have completed: before, a trial outside the top of its rung goes on (its
        rung value is recorded all the same, for the trials after it)."""
        if not self.startup_trials:
            return True
        return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))) >= self.startup_trials

    def at_pending_rungs(self, trial: FrozenTrial, first: int) -> Iterator[FrozenTrial]:
        """For each rung the trial has passed and Optuna has not recorded, lowest first: the trial as it was at
        its first report at or past the rung (later reports left out, the rungs below marked recorded)."""
        recorded = dict(trial.system_attrs)
        steps = sorted(trial.intermediate_values)
        rung = 0
        while f"{RUNG_KEY}{rung}" in recorded:
            rung += 1
        while (rung_step := first * self.reduction_factor**rung) <= steps[-1]:
            reached = next(step for step in steps if step >= rung_step)
            view = copy.copy(trial)
            view.intermediate_values = {s: trial.intermediate_values[s] for s in steps if s <= reached}
            view.system_attrs = dict(recorded)
            yield view
            # Not pruned there: Optuna recorded every rung up to the reported step.
            while first * self.reduction_factor**rung <= reached:
                recorded[f"{RUNG_KEY}{rung}"] = trial.intermediate_values[reached]
                rung += 1

    def first_rung(self, trial: FrozenTrial) -> int | None:
        """The trial's first reported step at or past `first_fraction` of its length; None before it (or without
        a length). Trials that evaluate at the same fractions of their length get the same first rung."""
        length = trial.user_attrs.get(LENGTH_ATTR)
        if not isinstance(length, int | float) or length <= 0:
            return None
        floor = max(1, math.ceil(length * self.first_fraction))
        return min((step for step in trial.intermediate_values if step >= floor), default=None)


def with_earlier_attempts(study: optuna.Study, trial: FrozenTrial) -> FrozenTrial:
    """A retry seen with the reports and passed rungs of the attempts it continues (a later attempt's report of a
    step wins); any other trial as it is (and the storage is not read)."""
    earlier = trial.user_attrs.get(REQUEUED_FROM)
    if earlier is None:
        return trial
    view = copy.copy(trial)
    for attempt in attempt_chain(
        study.get_trials(deepcopy=False), earlier
    ):  # latest first: the view's entries win
        rungs = {k: v for k, v in attempt.system_attrs.items() if k.startswith(RUNG_KEY)}
        view.intermediate_values = {**attempt.intermediate_values, **view.intermediate_values}
        view.system_attrs = {**rungs, **view.system_attrs}
    return view
