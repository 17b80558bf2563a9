"""The adaptive first rung on a real Optuna study: where it judges, and how it moves with what completed trials show."""

from __future__ import annotations

import optuna
import pytest

from bench.search.adaptive_rungs import AdaptiveRungsPruner
from hpo.storage.stop_rungs import LENGTH_ATTR

LENGTH = 270  # evaluations every 10 steps: 1/27 -> step 10, 1/9 -> 30, 1/3 -> 90
STEPS = list(range(10, LENGTH + 1, 10))


def complete(study: optuna.Study, curve: dict[int, float], final: float) -> None:
    trial = study.ask()
    trial.set_user_attr(LENGTH_ATTR, LENGTH)
    for step, value in curve.items():
        trial.report(value, step)
    study.tell(trial, final)


def report_until(study: optuna.Study, pruner: AdaptiveRungsPruner, values: dict[int, float]) -> int | None:
    """A new trial reporting `values` in order: the step it is stopped at, or None."""
    trial = study.ask()
    trial.set_user_attr(LENGTH_ATTR, LENGTH)
    for step, value in values.items():
        trial.report(value, step)
        if pruner.prune(study, study._storage.get_trial(trial._trial_id)):  # noqa: SLF001 - the pruner's view
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            return step
    study.tell(trial, values[max(values)])
    return None


@pytest.fixture
def study() -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(direction="maximize")


def test_before_enough_trials_completed_the_first_rung_is_at_a_ninth(study: optuna.Study) -> None:
    pruner = AdaptiveRungsPruner(min_pairs=4)
    complete(study, {step: 0.9 for step in STEPS}, 0.9)
    complete(study, {step: 0.8 for step in STEPS}, 0.8)
    # worst at every step: reported at 10 and 20 without a judgement, stopped at 30 (a ninth of 270)
    assert report_until(study, pruner, {step: 0.1 for step in STEPS}) == 30


def test_early_values_that_rank_the_finals_move_the_rung_to_the_first_evaluation(study: optuna.Study) -> None:
    pruner = AdaptiveRungsPruner(min_pairs=4)
    for quality in (0.2, 0.4, 0.6, 0.8):
        complete(study, {step: quality + step / 10_000 for step in STEPS}, quality + 0.05)
    assert report_until(study, pruner, {step: 0.1 for step in STEPS}) == 10


def test_early_values_that_cross_later_move_the_rung_to_a_third(study: optuna.Study) -> None:
    pruner = AdaptiveRungsPruner(min_pairs=4)
    # the best at the end is the worst until past a third: no rung before it ranks the finals
    for quality in (0.2, 0.4, 0.6, 0.8):
        curve = {step: (1 - quality if step < 90 else quality) for step in STEPS}
        complete(study, curve, quality)
    assert report_until(study, pruner, {step: 0.1 for step in STEPS}) == 90


def test_a_trial_among_the_best_half_goes_on_past_every_rung(study: optuna.Study) -> None:
    pruner = AdaptiveRungsPruner(min_pairs=4)
    for quality in (0.2, 0.4, 0.6, 0.8):
        complete(study, {step: quality for step in STEPS}, quality)
    assert report_until(study, pruner, {step: 0.7 for step in STEPS}) is None


def test_minimised_metrics_keep_the_lowest(study: optuna.Study) -> None:
    study = optuna.create_study(direction="minimize")
    pruner = AdaptiveRungsPruner(min_pairs=4)
    for loss in (0.2, 0.4, 0.6, 0.8):
        complete(study, {step: loss for step in STEPS}, loss)
    assert report_until(study, pruner, {step: 0.1 for step in STEPS}) is None
    assert report_until(study, pruner, {step: 0.9 for step in STEPS}) == 10


def test_a_trial_without_its_length_is_never_stopped(study: optuna.Study) -> None:
    pruner = AdaptiveRungsPruner(min_pairs=1)
    complete(study, {step: 0.9 for step in STEPS}, 0.9)
    trial = study.ask()
    for step in STEPS[:5]:
        trial.report(0.0, step)
    assert not pruner.prune(study, study._storage.get_trial(trial._trial_id))  # noqa: SLF001
