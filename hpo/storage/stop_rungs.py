"""Stop-type ASHA rungs placed as fractions of each trial's length: `scheduler: {type: asha}` (mode stop).

Optuna's successive halving (asynchronous: a trial is judged against every trial that reached its rung before it)
needs its first rung in the unit of the reports, global steps. A study file that trains by `num_train_epochs` does
not know its length in steps until the data is loaded, and a study that searches the batch size has a different
length in each trial. So the trial writes its own length (`LENGTH_ATTR`, in global steps, hpo.trial.pruning) with
its first report, and this pruner puts its first rung at the trial's first evaluation at or past `first_fraction` of
that length (0: its first evaluation), each next one `reduction_factor` times further. Every trial is judged at the
same fraction of its training, whatever its step count.

At a rung a trial goes on when its value is among the best max(1, floor(n * keep)) of the n trials that reached the
rung (itself included; ties go on, NaN stops): Optuna's successive halving with the share kept apart from the rungs'
spacing (Optuna keeps 1 / reduction_factor, what `keep` defaults to). The rung values are recorded as Optuna's
pruner records them (`RUNG_KEY`), asynchronously: a trial is judged against those that reached the rung before it.

With `ranked`, the share kept at a rung follows how well the rung ranks what comes after it in this study (`keep:
ranked`, the default of `scheduler: {type: asha}`): the pairs (value at the rung's fraction f of the length, value at
RANKED_AHEAD * f) of the other trials that have both; before RANKED_MIN_PAIRS of them exist, or with a Spearman
correlation between RANKED_LOW and RANKED_HIGH, two thirds are kept; a third at RANKED_HIGH or more (the rung
ranks: cut as successive halving does); every trial below RANKED_LOW (the rung misleads: stop nothing there). Such
pairs exist as soon as a few trials have gone four times further, long before any completes. Fewer than
RANKED_MIN_PAIRS pairs cut to a third too when they rank beyond doubt (RANKED_SURE: 4-6 pairs in perfect order, 7
nearly), so that curves that rank from the first evaluation are cut before eight trials have gone four times further.
bench/search chose it on 19 recorded problems at 400 seeds (docs/search-rounds.md, "Round 9"; the early cut in "Round
13", on 28 and then on three problems made after it was stated; two thirds rather than three quarters in "Round 17",
at the costs a real trial pays, on 37 and then on three more), equal seed for seed to `bench/search/ranked_keep.py`.
Rounds 14 and 15 kept a share before the pairs that followed what a trial costs to start (half where it starts for
under half an evaluation interval, seven eighths where for six or more); real trials of short problems measure a
start of about one interval (round 16), where the simulator had measured six to ten, so those rules acted in real
runs where they had not been chosen to, and round 17 dropped them.

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
from optuna.pruners import BasePruner
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from hpo.storage.attempts import REQUEUED_FROM, attempt_chain
from hpo.storage.ranks import spearman

LENGTH_ATTR = "max_steps"  # user attribute: the trial's full length in global steps, the unit of its reports
# Rung n's value is the system attribute "completed_rung_<n>", the key Optuna's successive halving records it under
# (optuna 5.0.0, the lock's), so a study's rungs read the same whichever of the two judged them; `with_earlier_attempts`
# and the chaos suite's rung check read it.
RUNG_KEY = "completed_rung_"
# The ranked share (module docstring): the later fraction paired with a rung's, the pairs it needs, the correlations
# that tell a rung that ranks from one that misleads, and the share kept at each (ranks, between, misleads).
RANKED_AHEAD = 4
RANKED_MIN_PAIRS = 8
RANKED_HIGH, RANKED_LOW = 0.8, 0.5
RANKED_KEEP_HIGH, RANKED_KEEP, RANKED_KEEP_LOW = 1 / 3, 2 / 3, 1.0
# Fewer than RANKED_MIN_PAIRS pairs still cut to RANKED_KEEP_HIGH when their correlation ranks beyond doubt: the lower
# bound of Fisher's z, RANKED_SURE standard errors (sqrt(1.06 / (n - 3)), Fieller, Hartley and Pearson) below the
# estimate, is at least RANKED_HIGH. At 1.28 (one-sided 90 %), 4 to 6 pairs must rank perfectly, 7 nearly (round 13).
RANKED_SURE = 1.28
RANKED_SURE_MIN_PAIRS = 4  # n - 3 must be positive, and 3 pairs prove nothing
SPEARMAN_CAP = 0.999  # a perfect ranking's z is infinite: capped, 4 perfect pairs clear RANKED_HIGH
# What a trial cost to start, written by hpo.trial.pruning with its first two reports: the seconds from its claim to
# its first report, and from there to its second (an evaluation interval). No rule reads them since round 17;
# bench/search/trial_costs.py and real.py do, to compare a real run's costs with the simulator's.
FIRST_REPORT_ATTR = "seconds_to_first_report"
EVALUATION_ATTR = "seconds_per_evaluation"


class StopRungsPruner(BasePruner):
    def __init__(
        self,
        first_fraction: float,
        reduction_factor: int,
        startup_trials: int = 0,
        keep: float | None = None,
        ranked: bool = False,
    ) -> None:
        if not 0 <= first_fraction < 1:
            raise ValueError(f"first_fraction must be in [0, 1), got {first_fraction}")
        if keep is not None and not 0 < keep < 1:
            raise ValueError(f"keep must be in (0, 1), got {keep}")
        self.first_fraction = first_fraction
        self.reduction_factor = reduction_factor
        self.startup_trials = startup_trials
        self.keep = keep if keep is not None else 1 / reduction_factor
        # The share kept at each rung from how the rung ranks (module docstring); `keep` is then unused.
        self.ranked = ranked

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        trial = with_earlier_attempts(study, trial)
        first = self.first_rung(trial)
        if first is None:
            return False
        judged = any(self.stops_at(study, view, first) for view in self.at_pending_rungs(trial, first))
        return judged and self.past_startup(study)

    def stops_at(self, study: optuna.Study, view: FrozenTrial, first: int) -> bool:
        """Record the view's value at each rung its last report passed that it has not recorded, lowest first, and
        whether it falls outside the share kept at one of them (Optuna's successive halving loop, its own share)."""
        step = max(view.intermediate_values)
        value = view.intermediate_values[step]
        rung = recorded_rungs(view.system_attrs)
        trials: list[FrozenTrial] | None = None
        while step >= first * self.reduction_factor**rung:
            if math.isnan(value):
                return True
            trials = trials if trials is not None else study.get_trials(deepcopy=False)
            key = f"{RUNG_KEY}{rung}"
            study._storage.set_trial_system_attr(view._trial_id, key, value)  # noqa: SLF001 - as Optuna's pruner
            others = [
                t.system_attrs[key] for t in trials if key in t.system_attrs and t.number != view.number
            ]
            share = (
                self.share_at(trials, view, first * self.reduction_factor**rung) if self.ranked else self.keep
            )
            if share < 1 and not among_kept(value, others, share, study.direction):
                return True
            rung += 1
        return False

    def share_at(self, trials: list[FrozenTrial], view: FrozenTrial, rung_step: int) -> float:
        """The ranked share kept at the view's rung at `rung_step`: from how the other trials' values at the rung's
        fraction of the length rank their values RANKED_AHEAD times further (module docstring)."""
        fraction = rung_step / view.user_attrs[LENGTH_ATTR]
        later = min(fraction * RANKED_AHEAD, 1.0)
        pairs = [
            (now, then)
            for t in trials
            if t.number != view.number
            and (now := value_at_fraction(t, fraction)) is not None
            and (then := value_at_fraction(t, later)) is not None
        ]
        if len(pairs) < RANKED_MIN_PAIRS:
            return RANKED_KEEP_HIGH if surely_ranks(pairs) else RANKED_KEEP
        correlation = spearman(pairs)
        if correlation >= RANKED_HIGH:
            return RANKED_KEEP_HIGH
        return RANKED_KEEP_LOW if correlation < RANKED_LOW else RANKED_KEEP

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
        rung = recorded_rungs(recorded)
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
        return step_at_fraction(trial, self.first_fraction)


def surely_ranks(pairs: list[tuple[float, float]]) -> bool:
    """Whether too few pairs for the plain rule still rank beyond doubt (RANKED_SURE): Spearman's correlation's
    lower bound on Fisher's z scale is at least RANKED_HIGH."""
    if len(pairs) < RANKED_SURE_MIN_PAIRS:
        return False
    correlation = spearman(pairs)
    if correlation < RANKED_HIGH:
        return False
    z = math.atanh(min(correlation, SPEARMAN_CAP))
    return math.tanh(z - RANKED_SURE * math.sqrt(1.06 / (len(pairs) - 3))) >= RANKED_HIGH


def step_at_fraction(trial: FrozenTrial, fraction: float) -> int | None:
    """The trial's first reported step at or past `fraction` of its length; None before it, or without a length."""
    length = trial.user_attrs.get(LENGTH_ATTR)
    if not isinstance(length, int | float) or length <= 0:
        return None
    floor = max(1, math.ceil(length * fraction))
    return min((step for step in trial.intermediate_values if step >= floor), default=None)


def value_at_fraction(trial: FrozenTrial, fraction: float) -> float | None:
    """The trial's value at `step_at_fraction`; None where it has none."""
    step = step_at_fraction(trial, fraction)
    return None if step is None else trial.intermediate_values[step]


def recorded_rungs(system_attrs: dict[str, object]) -> int:
    """How many rungs, from the lowest, have a recorded value."""
    rung = 0
    while f"{RUNG_KEY}{rung}" in system_attrs:
        rung += 1
    return rung


def among_kept(value: float, others: list[float], keep: float, direction: StudyDirection) -> bool:
    """Whether `value` is among the best max(1, floor(n * keep)) of the n values of itself and `others` (ties go on,
    NaN never). With keep 1 / reduction_factor, Optuna's successive halving's rule."""
    if math.isnan(value):
        return False
    pool = sorted(
        [value, *(v for v in others if not math.isnan(v))], reverse=direction == StudyDirection.MAXIMIZE
    )
    cutoff = pool[max(1, math.floor(len(pool) * keep + 1e-9)) - 1]
    return value >= cutoff if direction == StudyDirection.MAXIMIZE else value <= cutoff


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
