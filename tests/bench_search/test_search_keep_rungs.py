"""Round 6's gentle rungs on a real Optuna study: how many a rung keeps, and where its rungs are."""

from __future__ import annotations

import optuna
import pytest

from bench.search.keep_rungs import KeepRungsPruner
from tests.bench_search.test_search_adaptive_rungs import STEPS, complete, report_until


@pytest.fixture
def study() -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(direction="maximize")


def two_done(study: optuna.Study) -> None:
    complete(study, {step: 0.9 for step in STEPS}, 0.9)
    complete(study, {step: 0.8 for step in STEPS}, 0.8)


def test_the_second_of_three_goes_on_when_two_thirds_are_kept(study: optuna.Study) -> None:
    two_done(study)
    assert report_until(study, KeepRungsPruner(keep=2 / 3), {step: 0.85 for step in STEPS}) is None


def test_the_second_of_three_stops_at_the_first_evaluation_when_half_is_kept(study: optuna.Study) -> None:
    two_done(study)
    assert report_until(study, KeepRungsPruner(keep=1 / 2), {step: 0.85 for step in STEPS}) == 10


def test_the_worst_of_three_stops_at_the_first_evaluation(study: optuna.Study) -> None:
    two_done(study)
    assert report_until(study, KeepRungsPruner(keep=3 / 4), {step: 0.1 for step in STEPS}) == 10


@pytest.mark.parametrize(("spacing", "stopped_at"), [(2, 40), (3, 90)])
def test_rungs_sit_at_the_first_evaluation_times_the_spacing(
    study: optuna.Study, spacing: int, stopped_at: int
) -> None:
    two_done(study)
    # the best until step 30, the worst from step 40 (evaluations every 10 steps): stopped at the first rung past 30,
    # 40 with rungs at 10, 20, 40 and 90 with rungs at 10, 30, 90
    curve = {step: (0.95 if step <= 30 else 0.1) for step in STEPS}
    assert report_until(study, KeepRungsPruner(keep=2 / 3, spacing=spacing), curve) == stopped_at


def test_minimised_metrics_keep_the_lowest() -> None:
    study = optuna.create_study(direction="minimize")
    for loss in (0.2, 0.4, 0.6, 0.8):
        complete(study, {step: loss for step in STEPS}, loss)
    pruner = KeepRungsPruner(keep=2 / 3)
    assert (
        report_until(study, pruner, {step: 0.5 for step in STEPS}) is None
    )  # 3rd of 5: floor(10/3) = 3 kept
    assert report_until(study, pruner, {step: 0.7 for step in STEPS}) == 10  # 5th of 6: 4 kept


def test_a_share_outside_zero_and_one_is_refused() -> None:
    with pytest.raises(ValueError, match="keep must be in"):
        KeepRungsPruner(keep=1.0)
