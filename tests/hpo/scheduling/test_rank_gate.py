"""ASHA's rank gate: a rung judges only once completed trials show that its values rank the final scores."""

from __future__ import annotations

import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from hpo.scheduling.promotion import gate_pairs
from hpo.scheduling.rank_gate import RankGate, ranks, spearman
from hpo.storage.pause import BOUNDARIES


def test_ranks_share_the_mean_rank_among_equal_values():
    assert ranks([0.9, 0.5, 0.9, 0.7]) == [3.5, 1.0, 3.5, 2.0]


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        ([(1, 10), (2, 20), (3, 30), (4, 40)], 1.0),
        ([(1, 40), (2, 30), (3, 20), (4, 10)], -1.0),
        ([(1, 1), (2, 3), (3, 2), (4, 4)], 0.8),  # 1 - 6 * 2 / (4 * 15)
        ([(0.5, 1), (0.5, 2), (0.5, 3)], 0.0),  # a rung that tells nothing apart ranks nothing
        ([(1, 2)], 0.0),
    ],
)
def test_spearman_of_known_pairs(pairs, expected):
    assert spearman(pairs) == pytest.approx(expected)


def test_spearman_with_ties_is_pearson_of_the_mean_ranks():
    # ranks (1.5, 1.5, 3, 4) against (1, 2, 3, 4): covariance 2.25 (centred on 2.5), spreads 4.5 and 5
    assert spearman([(0.7, 1), (0.7, 2), (0.8, 3), (0.9, 4)]) == pytest.approx(4.5 / (4.5 * 5) ** 0.5)


def test_the_gate_opens_with_enough_pairs_that_rank_alike():
    agreeing = [(i, i + 0.5) for i in range(8)]
    assert not RankGate().is_open(agreeing[:7])  # 7 pairs: too few to trust, however well they agree
    assert RankGate().is_open(agreeing)
    shuffled = [(i, v) for i, v in zip(range(8), [3, 1, 7, 0, 5, 2, 6, 4], strict=True)]
    assert spearman(shuffled) < 0.7 and not RankGate().is_open(shuffled)
    assert RankGate(min_pairs=2, min_correlation=-1.0).is_open(shuffled[:2])


def a_trial(state: TrialState, value: float | None, boundaries: dict[str, float]):
    return create_trial(
        state=state,
        value=value,
        params={"x": 0.5},
        distributions={"x": FloatDistribution(0, 1)},
        intermediate_values={int(k): v for k, v in boundaries.items()},
        system_attrs={BOUNDARIES: boundaries},
    )


def test_pairs_are_the_completed_trials_value_at_the_point_and_their_score():
    trials = [
        a_trial(TrialState.COMPLETE, 0.9, {"5": 0.6}),
        a_trial(TrialState.COMPLETE, 0.8, {"5": 0.7, "10": 0.75}),
        a_trial(TrialState.PRUNED, 0.5, {"5": 0.5}),  # stopped at the rung: no final score to rank
        a_trial(TrialState.COMPLETE, 0.95, {"10": 0.9}),  # never reported at step 5
        a_trial(TrialState.RUNNING, None, {"5": 0.8}),
    ]
    assert gate_pairs(trials, 5) == [(0.6, 0.9), (0.7, 0.8)]
    assert gate_pairs(trials, 10) == [(0.75, 0.8), (0.9, 0.95)]
