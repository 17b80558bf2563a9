"""Rounds 4-5's candidates on a real Optuna study: Ray Tune's recipe once early values rank, and BOHB's random third."""

from __future__ import annotations

import optuna
import pytest

from bench.search.early_ranks import EarlyRanksPruner, EarlyRanksSampler
from bench.search.random_share import RandomShareSampler
from hpo.storage.stop_rungs import LENGTH_ATTR

LENGTH = 270  # evaluations every 10 steps: the first at 10, a ninth at 30
STEPS = list(range(10, LENGTH + 1, 10))


@pytest.fixture
def study() -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(direction="maximize")


def complete(study: optuna.Study, curve: dict[int, float]) -> None:
    trial = study.ask()
    trial.set_user_attr(LENGTH_ATTR, LENGTH)
    for step, value in curve.items():
        trial.report(value, step)
    study.tell(trial, curve[LENGTH])


def stopped_at(
    study: optuna.Study, pruner: optuna.pruners.BasePruner, values: float | dict[int, float]
) -> int | None:
    """The step where `pruner` stops a trial reporting `values` (one value throughout, or a step's value from that step
    on), or None if it runs to the end."""
    trial = study.ask()
    trial.set_user_attr(LENGTH_ATTR, LENGTH)
    curve = values if isinstance(values, dict) else {STEPS[0]: values}
    value = 0.0
    for step in STEPS:
        value = curve.get(step, value)
        trial.report(value, step)
        if pruner.prune(study, study._storage.get_trial(trial._trial_id)):  # noqa: SLF001 - the pruner's view
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            return step
    study.tell(trial, value)
    return None


def qualities(n: int) -> list[float]:
    return [0.1 + 0.8 * i / (n - 1) for i in range(n)]


def test_first_evaluations_that_rank_the_ninth_turn_to_rays_recipe(study: optuna.Study) -> None:
    pruner = EarlyRanksPruner(pairs=10, min_correlation=0.8)
    sampler = EarlyRanksSampler(optuna.samplers.TPESampler(seed=0), seed=0)
    for q in qualities(10):
        complete(study, {step: q + step / 10_000 for step in STEPS})
    assert sampler.pick(study) is sampler.random
    assert stopped_at(study, pruner, 0.05) == 10  # judged at its first evaluation


def test_first_evaluations_that_mislead_keep_the_shipped_rungs(study: optuna.Study) -> None:
    pruner = EarlyRanksPruner(pairs=10, min_correlation=0.8)
    sampler = EarlyRanksSampler(optuna.samplers.TPESampler(seed=0), seed=0)
    for q in qualities(10):
        complete(study, {step: (1 - q if step == 10 else q) for step in STEPS})
    assert sampler.pick(study) is sampler.model
    assert stopped_at(study, pruner, 0.05) == 30  # its first evaluation goes on; judged at a ninth


def test_until_enough_pairs_the_shipped_rungs_judge(study: optuna.Study) -> None:
    pruner = EarlyRanksPruner(pairs=10, min_correlation=0.8)
    for q in qualities(3):
        complete(study, {step: q for step in STEPS})
    assert stopped_at(study, pruner, 0.05) == 30


def test_a_third_of_the_trials_are_drawn_at_random_the_same_way_on_every_worker() -> None:
    trials = [optuna.trial.create_trial(value=0.0, params={}, distributions={}) for _ in range(600)]
    for number, trial in enumerate(trials):
        trial.number = number
    first, second = (RandomShareSampler(optuna.samplers.TPESampler(seed=0), 1 / 3, seed=7) for _ in range(2))
    drawn = [first.is_random(t) for t in trials]
    assert drawn == [second.is_random(t) for t in trials]
    assert 0.28 < sum(drawn) / len(drawn) < 0.39
