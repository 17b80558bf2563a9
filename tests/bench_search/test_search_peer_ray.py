"""bench/search/peer_ray.py drives Ray Tune's ASHA in an event loop of its own (Ray has no simulated clock). The loop and
the draw are numpy only, so they are checked here without Ray: the clock adds up the recorded segments and the start
cost as our simulator does, a stop frees the worker at once, and every drawn point lies in the study's space."""

from __future__ import annotations

import numpy as np
import pytest

from bench.search import peer_ray
from bench.search.problems import PROBLEMS, RECORDED
from bench.search.recording import load


def test_one_worker_that_never_stops_a_trial_adds_up_the_recorded_segments():
    values = np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])
    segments = np.array([[1.0, 2.0, 3.0], [0.5, 0.5, 0.5]])
    rows = iter([0, 1, 0, 1])
    run = peer_ray.simulate_stop_type(
        values, segments, lambda: next(rows), lambda *_: False, workers=1, budget_s=9.0, start_s=0.25
    )
    # trial 0: 0.25 + 1, 3, 6 (6.25); trial 1: 6.25 + 0.25 + 0.5 each (7.0, 7.5, 8.0); trial 2 would end at 9.25
    assert run.trace == [[1.25, 0.1], [3.25, 0.2], [6.25, 0.3], [7.0, 0.4], [7.5, 0.5], [8.0, 0.6]]
    assert run.trials == 3 and run.evaluations == 6 and run.busy_s == pytest.approx(9.0)


def test_a_stopped_trial_frees_its_worker_at_once_for_a_new_configuration():
    values = np.array([[0.1, 0.2, 0.3]])
    segments = np.array([[1.0, 1.0, 1.0]])
    stopped_at = []

    def decide(trial: int, evaluation: int, value: float) -> bool:
        stopped_at.append((trial, evaluation))
        return evaluation == 1  # every trial stops at its first report

    run = peer_ray.simulate_stop_type(
        values, segments, lambda: 0, decide, workers=2, budget_s=3.0, start_s=0.0
    )
    assert [t for t, _ in run.trace] == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    assert run.trials == 8 and {e for _, e in stopped_at} == {1}


@pytest.mark.parametrize("name", RECORDED)
def test_every_drawn_point_lies_in_the_space_and_replays_a_recorded_configuration(name):
    recording = load(PROBLEMS[name])
    space = {k: p.model_dump(exclude_none=True) for k, p in recording.space.items()}
    params, *_ = peer_ray.load_curves(str(recording.problem.data_file), recording.metric)
    encoded = np.array([peer_ray.encode(p, space) for p in params])
    rng = np.random.default_rng(0)
    for _ in range(200):
        point = peer_ray.draw(space, rng)
        assert set(point) == set(space)
        for key, p in space.items():
            if p["type"] == "categorical":
                assert point[key] in p["choices"]
            else:
                assert p["low"] <= point[key] <= p["high"]
            if p["type"] == "int":
                assert (point[key] - p["low"]) % (p.get("step") or 1) == 0
        assert 0 <= peer_ray.nearest(encoded, point, space) < len(params)  # peer_synetune's map: tested there
