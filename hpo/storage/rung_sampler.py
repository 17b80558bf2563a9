"""A TPE sampler that learns from every value a trial reported, paused and running trials included: BOHB's model on
the highest budget with enough observations (Falkner et al., "BOHB: Robust and Efficient Hyperparameter Optimization
at Scale", ICML 2018), through Optuna's sampler interface, so it serves promotion (ASHA) and stop-type (pruner)
studies alike.

Why: Optuna's TPE looks at COMPLETE and PRUNED trials only. A trial that ASHA paused is WAITING, so under promotion
ASHA plain TPE learns from nothing until trials finish the full budget or are ended, and samples as random search
does for most of a study (docs/benchmarks.md, "Which search finds a good model soonest").

What the model sees, rebuilt from the storage at each draw (no state of its own, so every `hpo worker` agrees and a
restarted study continues as it was):
    observations at a budget b: every trial's intermediate value at step b (a COMPLETE trial also has one at the
        final budget: its value), whatever its state: COMPLETE, PRUNED, paused (WAITING) or RUNNING
    b: the highest budget with at least `min_points` observations (default: n_startup_trials)
    a trial with a value at b (or, lacking one, at the next budget it reached) counts as COMPLETE with that value;
        a trial that stopped or paused below b counts as PRUNED at its last step (TPE ranks those after every
        COMPLETE one, higher steps first: the rule that stopped them judged them worse)
Multi-objective studies see Optuna's own view: the budgets have one value each only for a single objective. With
`constant_liar`, running trials that reported nothing yet are left out (the view has no RUNNING trials).
"""

from __future__ import annotations

import math
from typing import Any, cast

import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import TPESampler
from optuna.trial import FrozenTrial, TrialState

FINAL = math.inf  # the budget of a COMPLETE trial's value
_STATES = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.WAITING, TrialState.RUNNING)


def observations(trial: FrozenTrial) -> dict[float, float]:
    """Budget -> value: the finite intermediate values, and a COMPLETE trial's value at FINAL."""
    seen: dict[float, float] = {
        float(step): float(v) for step, v in trial.intermediate_values.items() if math.isfinite(v)
    }
    if trial.state == TrialState.COMPLETE and trial.value is not None and math.isfinite(trial.value):
        seen[FINAL] = float(trial.value)
    return seen


def model_budget(seen: list[dict[float, float]], min_points: int) -> float | None:
    """The highest budget with at least `min_points` observations; None when none has (TPE then draws at random)."""
    counts: dict[float, int] = {}
    for trial in seen:
        for budget in trial:
            counts[budget] = counts.get(budget, 0) + 1
    enough = [budget for budget, n in counts.items() if n >= min_points]
    return max(enough, default=None)


def as_seen_at(trial: FrozenTrial, seen: dict[float, float], budget: float | None) -> FrozenTrial | None:
    """The trial as the model sees it at `budget`: COMPLETE with its value there, PRUNED below it, None (left out)
    with no observation at all."""
    if not seen:
        return trial if trial.state == TrialState.COMPLETE else None  # e.g. an objective without reports
    reached = sorted(b for b in seen if budget is not None and b >= budget)
    steps = {int(b): v for b, v in seen.items() if math.isfinite(b)}
    if reached:
        return _copy(trial, TrialState.COMPLETE, seen[reached[0]], {})
    return _copy(trial, TrialState.PRUNED, None, steps)


def _copy(trial: FrozenTrial, state: TrialState, value: float | None, steps: dict[int, float]) -> FrozenTrial:
    constraints = trial.system_attrs.get("constraints")
    return FrozenTrial(
        number=trial.number,
        state=state,
        value=value,
        datetime_start=trial.datetime_start,
        datetime_complete=trial.datetime_complete,
        params=trial.params,
        distributions=trial.distributions,
        user_attrs={},
        system_attrs={} if constraints is None else {"constraints": constraints},
        intermediate_values=steps,
        trial_id=trial._trial_id,  # noqa: SLF001 - FrozenTrial's constructor takes it; nothing reads it here
    )


def rung_view(trials: list[FrozenTrial], min_points: int) -> list[FrozenTrial]:
    """Every trial the model learns from, as it sees it (see the module's docstring)."""
    kept = [(t, observations(t)) for t in trials if t.state in _STATES]
    kept = [(t, seen) for t, seen in kept if seen or t.state == TrialState.COMPLETE]
    budget = model_budget([seen for _, seen in kept], min_points)
    view = [as_seen_at(t, seen, budget) for t, seen in kept]
    return [t for t in view if t is not None]


class _StudyView:
    """The study as TPE sees it: every call goes to the real study, except the trial list."""

    def __init__(self, study: optuna.Study, trials: list[FrozenTrial]) -> None:
        self._study, self._view = study, trials

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)

    def _get_trials(
        self, deepcopy: bool = True, states: Any = None, use_cache: bool = False
    ) -> list[FrozenTrial]:
        return [t for t in self._view if states is None or t.state in states]

    def get_trials(self, deepcopy: bool = True, states: Any = None) -> list[FrozenTrial]:
        return self._get_trials(deepcopy, states)


class RungTPESampler(TPESampler):
    """`TPESampler` over `rung_view`: takes TPESampler's arguments, and `min_points` (observations a budget needs
    before the model uses it; default n_startup_trials)."""

    def __init__(self, *args: Any, min_points: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._min_points = min_points if min_points is not None else max(1, self._n_startup_trials)
        self._cached: tuple[list[FrozenTrial], list[FrozenTrial]] | None = None

    def _view(self, study: optuna.Study) -> optuna.Study:
        if study._is_multi_objective():  # noqa: SLF001 - TPE's own test
            return study
        trials = study._get_trials(deepcopy=False, use_cache=True)  # noqa: SLF001 - the list one ask shares
        if self._cached is None or self._cached[0] is not trials:
            self._cached = (trials, rung_view(trials, self._min_points))
        return cast(optuna.Study, _StudyView(study, self._cached[1]))

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return super().infer_relative_search_space(self._view(study), trial)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return super().sample_relative(self._view(study), trial, search_space)

    def sample_independent(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        return super().sample_independent(self._view(study), trial, param_name, param_distribution)
