"""Round 8's candidate on a real Optuna study: the share kept at a rung follows how well the rung's values rank the
values four times further on (bench/search/ranked_keep.py)."""

from __future__ import annotations

import optuna
import pytest

from bench.search.ranked_keep import RankedKeepPruner
from hpo.storage.stop_rungs import EVALUATION_ATTR, FIRST_REPORT_ATTR
from tests.bench_search.test_search_early_ranks import LENGTH, LENGTH_ATTR, STEPS, complete, stopped_at

# An evaluation every 10 steps of 270: rungs at 10, 20, 40, 80, 160; the values at 10 pair with those at 40.


@pytest.fixture
def study() -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(direction="maximize")


def ranking(quality: float) -> dict[int, float]:
    return {step: quality + step / 10_000 for step in STEPS}


def crossing(quality: float) -> dict[int, float]:
    """Worst at the first evaluation what is best from the third on."""
    return {step: (1 - quality if step < 30 else quality) for step in STEPS}


QUALITIES = [0.1 * q for q in range(1, 9)]  # eight trials: the pairs it needs


def test_where_the_rung_ranks_what_follows_it_keeps_half(study: optuna.Study) -> None:
    for quality in QUALITIES:
        complete(study, ranking(quality))
    # 0.35 at the first evaluation: 6th of 9, inside three quarters (6) but outside half (4)
    assert stopped_at(study, RankedKeepPruner(), 0.35) == 10
    assert stopped_at(study, RankedKeepPruner(high=1.01), 0.35) is None  # the rule's middle share: 3/4


def test_where_the_rung_misranks_what_follows_it_no_trial_stops_there(study: optuna.Study) -> None:
    for quality in QUALITIES:
        complete(study, crossing(quality))
    # the worst value goes on past the rungs at 10 and 20, whose values rank the later ones backwards, and stops at
    # 40, whose values rank the ones at 160 (keep half there)
    assert stopped_at(study, RankedKeepPruner(), 0.0) == 40


def test_before_enough_pairs_the_default_share_judges(study: optuna.Study) -> None:
    for quality in QUALITIES[:4]:
        complete(study, crossing(quality))
    assert stopped_at(study, RankedKeepPruner(), 0.0) == 10  # 5th of 5: outside three quarters (3)


def stopped_after(study: optuna.Study, curve: dict[int, float], last: int) -> None:
    trial = study.ask()
    trial.set_user_attr(LENGTH_ATTR, LENGTH)
    for step in STEPS[: STEPS.index(last) + 1]:
        trial.report(curve[step], step)
    study.tell(trial, state=optuna.trial.TrialState.PRUNED)


@pytest.mark.parametrize(("curve", "sixth", "inherits"), [(ranking, 0.35, True), (crossing, 0.45, False)])
def test_an_upper_rung_without_pairs_takes_the_hard_cut_of_a_lower_rung_that_ranks(
    study: optuna.Study, curve, sixth: float, inherits: bool
) -> None:
    # Eight trials stopped at 40: the rung at 10 has its eight pairs (10, 40), the rung at 20 none (20, 80).
    for quality in QUALITIES:
        stopped_after(study, curve(quality), 40)
    # first at 10, then 6th of 9 at 20: inside three quarters (6), outside a third (3)
    climber = {10: 0.95, 20: sixth}
    inheriting = RankedKeepPruner(high_keep=1 / 3, inherit=True)
    # where the rung at 10 ranks (Spearman 1 with 40) the rung at 20 cuts to a third; where it misranks, it keeps 3/4
    assert stopped_at(study, inheriting, climber) == (20 if inherits else None)
    # without `inherit`, the rung at 20 keeps three quarters until its own pairs come (a climber stopped at 20 adds
    # no pair at 10, so the study is as it was)
    assert stopped_at(study, RankedKeepPruner(high_keep=1 / 3), climber) is None


@pytest.mark.parametrize(("curve", "cuts"), [(ranking, True), (crossing, False)])
def test_fewer_pairs_cut_hard_only_when_they_rank_beyond_doubt(
    study: optuna.Study, curve, cuts: bool
) -> None:
    # Four trials: four pairs (10, 40). Ranking perfectly, their correlation's lower bound clears 0.8 (round 13's
    # `sure`); ranking backwards, it does not, and three quarters are kept as before the pairs come.
    for quality in QUALITIES[:4]:
        complete(study, curve(quality))
    # 0.25 at 10 (0.75 where the curves cross): 3rd of 5, inside three quarters (3), outside a third (1)
    third = 0.25 if curve is ranking else 0.75
    sure = RankedKeepPruner(high_keep=1 / 3, sure=1.28)
    assert stopped_at(study, sure, third) == (10 if cuts else None)
    assert (
        stopped_at(study, RankedKeepPruner(high_keep=1 / 3), third) is None
    )  # without it: 3/4 until 8 pairs


def timed(
    study: optuna.Study, curve: dict[int, float], to_first: float | None, interval: float | None
) -> None:
    """A finished trial that wrote (or not) its time to its first report and its evaluation interval."""
    trial = study.ask()
    trial.set_user_attr(LENGTH_ATTR, LENGTH)
    if to_first is not None:
        trial.set_user_attr(FIRST_REPORT_ATTR, to_first)
    if interval is not None:
        trial.set_user_attr(EVALUATION_ATTR, interval)
    for step in STEPS:
        trial.report(curve[step], step)
    study.tell(trial, curve[LENGTH])


@pytest.mark.parametrize(
    ("to_first", "interval", "cheap"),
    [
        (1.3, 1.0, True),  # started for 0.3 of an evaluation: under half of one
        (1.6, 1.0, False),  # for 0.6 of one
        (0.5, 0.1, False),  # for four evaluations (a short tabular trial)
        (1.3, None, False),  # no trial has reported twice: nothing measured, the default prior
    ],
)
def test_before_the_pairs_come_half_is_kept_only_where_a_trial_starts_for_under_half_an_evaluation(
    study: optuna.Study, to_first: float, interval: float | None, cheap: bool
) -> None:
    # Three trials whose curves cross (three pairs: too few for `sure`), at 0.9, 0.8 and 0.7 at the first evaluation.
    # 0.75 there is 3rd of 4: inside three quarters (3), outside half (2).
    for quality in QUALITIES[:3]:
        timed(study, crossing(quality), to_first, interval)
    round_14 = RankedKeepPruner(high_keep=1 / 3, sure=1.28, cheap_keep=1 / 2, cheap_below=1.5)
    assert stopped_at(study, round_14, 0.75) == (10 if cheap else None)
    # what ships (no `cheap_keep`) keeps three quarters before the pairs come, however cheaply trials start
    assert stopped_at(study, RankedKeepPruner(high_keep=1 / 3, sure=1.28), 0.75) is None


def test_a_hedged_trial_runs_to_the_end_where_the_same_values_stop_another(study: optuna.Study) -> None:
    # Round 18's hedge: with hedge_every 10, trial number 9 is never stopped (0.35 at the first evaluation: 6th of 9,
    # outside half, where the rung ranks).
    for quality in QUALITIES:
        complete(study, ranking(quality))
    assert stopped_at(study, RankedKeepPruner(hedge_every=10), 0.35) == 10  # number 8
    assert stopped_at(study, RankedKeepPruner(hedge_every=10), 0.35) is None  # number 9


def test_a_hedged_trial_until_it_ranks_is_cut_only_where_the_rung_ranks(study: optuna.Study) -> None:
    for quality in QUALITIES:
        complete(study, ranking(quality))
    until_ranks = {"hedge_every": 9, "hedge_until_ranks": True}  # number 8 hedged
    # where the rung ranks (Spearman 1: half kept), the hedged trial is judged as any other: 0.15 is 8th of 9
    assert stopped_at(study, RankedKeepPruner(**until_ranks), 0.15) == 10


def test_a_hedged_trial_until_it_ranks_goes_on_under_the_middle_share(study: optuna.Study) -> None:
    for quality in QUALITIES:
        complete(study, ranking(quality))
    # with `high` out of reach the share is the middle one (three quarters): 0.15 is 8th of 9 (number 8) and 9th of
    # 10 (number 9), outside it both times; only the hedged one goes on
    middle = {"high": 1.01, "hedge_every": 10, "hedge_until_ranks": True}
    assert stopped_at(study, RankedKeepPruner(**middle), 0.15) == 10  # number 8
    assert stopped_at(study, RankedKeepPruner(**middle), 0.15) is None  # number 9, hedged


def test_a_rung_where_the_best_later_sat_low_keeps_all_before_the_pairs_rank(study: optuna.Study) -> None:
    # Round 19's hedge: four trials whose values at 10 and 20 rank those four times further on backwards. With four
    # pairs the plain rule cuts at 10; where the best at 40 sat outside the top third at 10, a cut there would have
    # stopped it, so the rungs at 10 and 20 keep all, and the rung at 40, whose values rank those at 160, cuts.
    for quality in QUALITIES[:4]:
        complete(study, crossing(quality))
    assert stopped_at(study, RankedKeepPruner(), 0.0) == 10
    assert stopped_at(study, RankedKeepPruner(lost_best=1 / 3), 0.0) == 40


def test_where_the_best_later_sat_inside_the_share_the_rung_cuts_as_before(study: optuna.Study) -> None:
    for quality in QUALITIES[:4]:
        complete(study, ranking(quality))
    assert stopped_at(study, RankedKeepPruner(lost_best=1 / 3), 0.0) == 10


def test_the_share_the_best_later_must_sit_in_decides_and_keeps_what_it_is_told(study: optuna.Study) -> None:
    # The best at 40 (0.6) is 3rd of 6 at 10: outside the top third (2), inside two thirds (4).
    for first, later in [(0.9, 0.3), (0.8, 0.2), (0.5, 0.6), (0.4, 0.1), (0.3, 0.05), (0.2, 0.0)]:
        complete(study, {step: (first if step < 30 else later) for step in STEPS})
    assert stopped_at(study, RankedKeepPruner(lost_best=2 / 3), 0.1) == 10  # the cut would have kept the best
    # it would not: all kept at 10 and 20; from 40 on, 0.1 is 4th of 7, inside three quarters
    assert stopped_at(study, RankedKeepPruner(lost_best=1 / 3), 0.1) is None
    # told to keep three quarters there (the plain rule's share): 0.1 is 7th of 7 either way
    assert stopped_at(study, RankedKeepPruner(lost_best=1 / 3, lost_best_keep=3 / 4), 0.1) == 10


def jittering(quality: float, jitter: float) -> dict[int, float]:
    """`quality` with the evaluation's noise: +jitter, -jitter in turn, from one evaluation to the next."""
    return {step: quality + (jitter if (step // 10) % 2 else -jitter) for step in STEPS}


def jittering_study(qualities: tuple[float, ...], jitter: float) -> optuna.Study:
    """A study of completed trials, one `jittering` curve per quality (a study a judged trial has not joined: its
    value at the rung would count in the rung's spread)."""
    study = optuna.create_study(direction="maximize")
    for quality in qualities:
        complete(study, jittering(quality, jitter))
    return study


NOISY = (0.50, 0.51, 0.52, 0.53)


def test_a_rung_whose_values_are_mostly_evaluation_noise_keeps_all() -> None:
    # Round 19's `reliable`: four trials whose qualities differ by 0.01 and whose evaluations jitter by 0.05 (their
    # second differences, 0.2, say the noise's variance is 0.015; the rung's values vary by 0.000125): the rung ranks
    # noise. Where the qualities differ by 0.1 and the jitter is 0.001, the rung is reliable and cuts as before.
    assert stopped_at(jittering_study(NOISY, 0.05), RankedKeepPruner(), 0.0) == 10
    assert stopped_at(jittering_study(NOISY, 0.05), RankedKeepPruner(reliable=0.7), 0.0) is None


def test_a_rung_whose_values_differ_beyond_the_noise_cuts_as_before() -> None:
    reliable = jittering_study((0.2, 0.3, 0.4, 0.5), 0.001)
    assert stopped_at(reliable, RankedKeepPruner(reliable=0.7), 0.0) == 10


def test_reliability_waits_for_trials_with_three_reports_from_the_rung() -> None:
    # three such trials, under the four it waits for: the plain rule cuts at 10
    assert stopped_at(jittering_study(NOISY[:3], 0.05), RankedKeepPruner(reliable=0.7), 0.0) == 10
    assert (
        stopped_at(jittering_study(NOISY[:3], 0.05), RankedKeepPruner(reliable=0.7, reliable_min=3), 0.0)
        is None
    )
