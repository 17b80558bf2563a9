"""The PBT quantile rule (given member scores, who exploits whom) and explore (perturb or resample, seeded)."""

from __future__ import annotations

import math
import random

import pytest

from hpo.scheduling.pbt_rule import choose_source, decision_rng, explore, perturb, quantiles, sample_value
from hpo.spec.pbt import MutationSpec
from hpo.spec.search_space import ParamSpec

LR = ParamSpec(type="float", low=1e-4, high=0.1, log=True)
WD = ParamSpec(type="float", low=0.01, high=0.2, step=0.01)
LAYERS = ParamSpec(type="int", low=1, high=8)
ACT = ParamSpec(type="categorical", choices=["relu", "gelu"])


def test_bottom_quantile_copies_top_quantile_when_maximizing():
    scores = {0: 0.91, 1: 0.52, 2: 0.88, 3: 0.60, 4: 0.75, 5: 0.70, 6: 0.95, 7: 0.30}
    bottom, top = quantiles(scores, 0.25, maximize=True)
    assert bottom == [7, 1] and top == [6, 0]  # worst first, best first
    rng = random.Random(0)
    assert choose_source(7, scores, 0.25, True, rng) in (6, 0)
    assert choose_source(1, scores, 0.25, True, rng) in (6, 0)
    for middle in (2, 3, 4, 5, 6, 0):
        assert choose_source(middle, scores, 0.25, True, rng) is None


def test_minimizing_reverses_the_order():
    scores = {0: 0.2, 1: 1.5, 2: 0.7, 3: 0.9}
    assert quantiles(scores, 0.25, maximize=False) == ([1], [0])


def test_quantile_sizes_round_up_but_never_overlap():
    assert quantiles({0: 1.0, 1: 2.0, 2: 3.0}, 0.25, True) == ([0], [2])  # ceil(0.75) = 1
    assert quantiles({0: 1.0, 1: 2.0, 2: 3.0}, 0.5, True) == ([0], [2])  # ceil(1.5) = 2 > 3 // 2
    assert quantiles({0: 1.0, 1: 2.0}, 0.5, True) == ([0], [1])
    assert quantiles({0: 1.0}, 0.5, True) == ([], [])  # alone: nobody to copy


def test_a_non_finite_score_ranks_last_and_ties_break_by_member():
    bottom, top = quantiles({0: math.nan, 1: 0.5, 2: 0.5, 3: 0.9}, 0.25, maximize=True)
    assert bottom == [0] and top == [3]
    bottom, top = quantiles({0: math.nan, 1: 0.5, 2: 0.5, 3: 0.9}, 0.25, maximize=False)
    assert bottom == [0] and top == [1]  # 1 and 2 tie at 0.5; the lower number ranks better, in every process


def test_perturb_multiplies_and_stays_in_range_on_the_grid():
    assert perturb(LR, 0.01, 1.2) == pytest.approx(0.012)
    assert perturb(LR, 0.09, 1.2) == 0.1  # clamped to the search space's high
    assert perturb(LR, 1e-4, 0.8) == 1e-4
    assert perturb(WD, 0.1, 1.2) == pytest.approx(0.12)
    assert perturb(WD, 0.05, 0.8) == pytest.approx(0.04)
    assert perturb(LAYERS, 4, 1.2) == 5 and isinstance(perturb(LAYERS, 4, 1.2), int)


def test_sample_value_follows_the_distribution():
    rng = random.Random(1)
    lrs = [sample_value(LR, rng) for _ in range(400)]
    assert all(1e-4 <= v <= 0.1 for v in lrs)
    # log scale: about half the draws fall below the geometric mean (3.2e-3), far more than a uniform draw would give
    assert 0.4 < sum(v < math.sqrt(1e-4 * 0.1) for v in lrs) / len(lrs) < 0.6
    assert {sample_value(ACT, rng) for _ in range(50)} == {"relu", "gelu"}
    decays = [sample_value(WD, rng) for _ in range(50)]
    assert all(
        0.01 <= v <= 0.2 and v * 100 == pytest.approx(round(v * 100)) for v in decays
    )  # on the step grid


def test_explore_perturbs_resamples_and_copies_the_rest():
    mutations = {
        "learning_rate": MutationSpec(factors=[0.8, 1.2]),
        "weight_decay": MutationSpec(resample=True),
    }
    space = {"learning_rate": LR, "weight_decay": WD, "hidden": LAYERS}
    source = {"learning_rate": 0.01, "weight_decay": 0.05, "hidden": 4}
    seen_lr = set()
    for seed in range(40):
        new = explore(source, mutations, space, resample_probability=0.0, rng=random.Random(seed))
        assert new["hidden"] == 4  # not mutated: copied from the source
        assert 0.01 <= new["weight_decay"] <= 0.2
        seen_lr.add(round(new["learning_rate"], 6))
    assert seen_lr == {0.008, 0.012}  # without resampling, only the factors
    resampled = [
        explore(source, mutations, space, resample_probability=1.0, rng=random.Random(s))["learning_rate"]
        for s in range(20)
    ]
    assert len({round(v, 6) for v in resampled} - {0.008, 0.012}) >= 18


def test_decisions_are_seeded_per_member_and_step():
    mutations = {"learning_rate": MutationSpec(factors=[0.5, 0.8, 1.2, 2.0])}
    space = {"learning_rate": LR}

    def draw(seed: int, member: int, step: int) -> float:
        return explore({"learning_rate": 0.01}, mutations, space, 0.5, decision_rng(seed, member, step))[
            "learning_rate"
        ]

    assert draw(0, 3, 40) == draw(0, 3, 40)  # a repeated decision is the same decision
    draws = {draw(0, member, step) for member in range(6) for step in (20, 40, 60)}
    assert len(draws) > 3  # members and steps draw apart
    assert {draw(0, 1, s) for s in range(10)} != {draw(1, 1, s) for s in range(10)}
