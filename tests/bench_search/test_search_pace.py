"""bench/search/pace.py: a real run's seconds per second of the recording, from the work its trials did; real.py puts
the run on the recording's clock by it and counts only what falls within the budget."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import FrozenTrial, TrialState

from bench.search.pace import cost_key, recorded_cost, run_pace
from bench.search.problems import PROBLEMS
from bench.search.real import on_recording_clock
from bench.search.recording import load
from bench.search.simulate import Outcome

T0 = datetime(2026, 12, 4, 13, 0, 0)


@pytest.fixture(scope="module")
def recording():
    return load(PROBLEMS["fresh7-charconst"])


def _trial(
    number: int, params: dict, evaluations: int, seconds: float, state=TrialState.PRUNED
) -> FrozenTrial:
    return FrozenTrial(
        number=number,
        state=state,
        value=None,
        values=None,
        datetime_start=T0,
        datetime_complete=T0 + timedelta(seconds=seconds),
        params=params,
        distributions={name: FloatDistribution(0, 1e9) for name in params},
        user_attrs={},
        system_attrs={},
        intermediate_values={step: 1.0 for step in range(evaluations)},
        trial_id=number,
    )


def test_trials_taking_half_again_their_recorded_cost_give_a_pace_of_1_5(recording):
    curves = recording.curves
    trials = []
    for number, index in enumerate([0, 5, 9]):
        params, evaluations = dict(curves[index].params), 1 + number * 3
        cost = recorded_cost(recording, params, evaluations, start_s=0.2)
        trials.append(_trial(number, params, evaluations, 1.5 * cost))
    trials.append(_trial(3, dict(curves[2].params), 0, 99.0, TrialState.FAIL))  # no evaluation: not counted
    assert run_pace(recording, trials, start_s=0.2) == pytest.approx(1.5)
    assert run_pace(recording, trials[3:], start_s=0.2) is None


def test_a_point_between_recorded_configurations_costs_what_those_of_its_sizes_cost(recording):
    params = dict(recording.curves[0].params)
    floats = [name for name, value in params.items() if isinstance(value, float)]
    assert floats, "the problem searches a float (learning rate): the case this test is about"
    moved = {**params, **{name: params[name] * 1.37 for name in floats}}  # a learning rate no curve has
    alike = [c for c in recording.curves if cost_key(c.params) == cost_key(params)]
    expected = sorted(0.2 + c.setup_s + sum(c.segment_s[:4]) for c in alike)
    assert recorded_cost(recording, moved, 4, start_s=0.2) == pytest.approx(
        (expected[(len(expected) - 1) // 2] + expected[len(expected) // 2]) / 2
    )


def test_on_the_recording_clock_only_the_budget_counts():
    outcome = Outcome(trace=[(1.0, 0.5), (9.0, 0.6), (13.0, 0.7)])
    outcome.started = [0.0, 4.0, 12.6]
    scaled = on_recording_clock(outcome, scale=1.25, budget_s=10.0)
    assert scaled.trace == [(0.8, 0.5), (7.2, 0.6)]  # 13 s is 10.4 s of the recording: past the budget
    assert scaled.started == [0.0, 3.2]
