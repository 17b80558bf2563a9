"""The ASHA promotion rule as a pure function of rung tables: which paused trial a free slot promotes, and which
paused trials can never be promoted (they end PRUNED and give back their disk)."""

from __future__ import annotations

from hpo.scheduling.asha import (
    Promotion,
    RungTrial,
    hopeless,
    next_promotion,
    rung_counts,
    values_by_rung,
)
from hpo.spec.scheduler import rung_levels


def paused(number: int, *values: float) -> RungTrial:
    """Paused at its highest rung, promoted from the ones below."""
    return RungTrial(number, dict(enumerate(values)), paused=True, promoted=set(range(len(values) - 1)))


def promoted(number: int, *values: float) -> RungTrial:
    """Reached len(values) rungs and was promoted from the highest one (running on toward the next)."""
    return RungTrial(number, dict(enumerate(values)), running=True, promoted=set(range(len(values))))


def test_rung_levels_are_min_times_eta_powers_below_max():
    assert rung_levels(1, 27, 3) == [1, 3, 9]
    assert rung_levels(4, 36, 3) == [4, 12]
    assert rung_levels(4, 16, 2) == [4, 8]
    assert rung_levels(5, 5, 2) == []


def test_a_lone_trial_is_not_promoted_the_top_third_of_three_is():
    assert next_promotion([paused(0, 0.9)], rungs=2, eta=3, maximize=True) is None
    table = [paused(0, 0.5), paused(1, 0.9), paused(2, 0.7)]
    assert next_promotion(table, rungs=2, eta=3, maximize=True) == Promotion(1, 0)
    # Minimising, the smallest value is the best.
    assert next_promotion(table, rungs=2, eta=3, maximize=False) == Promotion(0, 0)


def test_the_highest_rung_is_served_first():
    table = [
        promoted(0, 0.9),
        promoted(1, 0.8),
        paused(2, 0.7),
        paused(3, 0.95, 0.99),
        promoted(4, 0.85, 0.5),
        paused(5, 0.6, 0.7),
    ]
    # Rung 0 has six trials: top 2 are 3 (0.95) and 0 (0.9); 3 is paused at rung 1 already, 0 is running.
    # Rung 1 has three: 3 (0.99), 5 (0.7), 4 (0.5); top 1 is trial 3, paused there: it goes first.
    assert next_promotion(table, rungs=3, eta=3, maximize=True) == Promotion(3, 1)


def test_a_trial_already_promoted_from_a_rung_is_not_promoted_again():
    table = [promoted(0, 0.9), paused(1, 0.5), paused(2, 0.4)]
    assert next_promotion(table, rungs=2, eta=3, maximize=True) is None


def test_growing_rungs_let_a_paused_trial_in_later():
    table = [paused(0, 0.7), paused(1, 0.9), paused(2, 0.5)]
    first = next_promotion(table, rungs=2, eta=3, maximize=True)
    assert first == Promotion(1, 0)
    table[1] = promoted(1, 0.9)
    assert next_promotion(table, rungs=2, eta=3, maximize=True) is None  # top 1 of 3 is taken
    table += [paused(3, 0.1), paused(4, 0.2), paused(5, 0.3)]
    assert next_promotion(table, rungs=2, eta=3, maximize=True) == Promotion(0, 0)  # now top 2 of 6


def test_no_promotion_past_the_last_pause_rung():
    table = [paused(0, 0.1, 0.9), paused(1, 0.2, 0.8), paused(2, 0.3, 0.7)]
    # Two pause rungs (0 and 1): rung 1's top third is promoted to max_resource.
    assert next_promotion(table, rungs=2, eta=3, maximize=True) == Promotion(0, 1)


def test_hopeless_counts_who_can_still_arrive():
    table = [paused(0, 0.9), paused(1, 0.5), paused(2, 0.1)]
    # Three more configurations may come: up to 6 at rung 0, top 2 -> ranks 1 and 2 may still go on.
    assert [t.number for t in hopeless(table, eta=3, maximize=True, new_configurations=3)] == [2]
    # None may come: only the top 1 of 3 can be promoted; the others are out.
    assert [t.number for t in hopeless(table, eta=3, maximize=True, new_configurations=0)] == [1, 2]
    # No n_trials (a timeout): anything may still arrive.
    assert hopeless(table, eta=3, maximize=True, new_configurations=None) == []


def test_hopeless_below_frees_the_rung_above():
    # Rung 1 has trial 3 alone and trial 4 (paused at rung 0, hopeless) could have joined it: once 4 is out, 3 is too.
    table = [promoted(0, 0.9, 0.95), paused(1, 0.1), paused(2, 0.2), paused(3, 0.8, 0.5), paused(4, 0.3)]
    out = {t.number for t in hopeless(table, eta=3, maximize=True, new_configurations=0)}
    assert out == {1, 2, 3, 4}


def test_running_trials_below_may_still_arrive():
    table = [paused(0, 0.9, 0.4), promoted(1, 0.8, 0.3), RungTrial(2, {}, running=True), paused(3, 0.1)]
    # Rung 1: 2 there now, trial 2 (running, no rung yet) and trial 3 (paused at 0) may arrive -> at most 4: top 1.
    assert [t.number for t in hopeless(table, eta=3, maximize=True, new_configurations=0)] == [3]


def test_rung_counts_and_values_by_rung():
    table = [promoted(0, 0.9), paused(1, 0.5), paused(2, 0.4, 0.3)]
    counts = rung_counts(table, 2)
    assert counts[0] == {"rung": 0, "reached": 3, "paused": 1, "promoted": 2}
    assert counts[1] == {"rung": 1, "reached": 1, "paused": 1, "promoted": 0}
    assert values_by_rung({4: 0.5, 12: 0.7, 36: 0.9}, [4, 12]) == {0: 0.5, 1: 0.7}


def test_underfilled_the_best_of_a_rung_below_eta_trials_goes_on():
    # hpo's default (scheduler.promote_underfilled): the first trial at a rung is its best, so it goes on at once,
    # as Optuna's successive-halving pruner lets it; the paper's rule waits for eta trials.
    assert next_promotion([paused(0, 0.9)], rungs=2, eta=3, maximize=True, underfilled=True) == Promotion(
        0, 0
    )
    table = [promoted(0, 0.9), paused(1, 0.5)]
    assert (
        next_promotion(table, rungs=2, eta=3, maximize=True, underfilled=True) is None
    )  # top 1 of 2 is taken
    table = [paused(0, 0.5), paused(1, 0.9)]
    assert next_promotion(table, rungs=2, eta=3, maximize=True, underfilled=True) == Promotion(1, 0)
    # From eta trials on, the rule is the paper's: top floor(n / eta).
    table = [promoted(0, 0.9), paused(1, 0.8), paused(2, 0.7), paused(3, 0.6), paused(4, 0.5), paused(5, 0.4)]
    for underfilled in (False, True):
        assert next_promotion(table, 2, 3, True, underfilled) == Promotion(1, 0)


def test_underfilled_the_best_paused_trial_is_never_hopeless():
    table = [paused(0, 0.9), paused(1, 0.5)]
    # Nothing more may arrive: the paper's rule promotes none of two (floor(2 / 3) = 0), ours the best one.
    assert [t.number for t in hopeless(table, 3, True, 0)] == [0, 1]
    assert [t.number for t in hopeless(table, 3, True, 0, underfilled=True)] == [1]
