"""bench/search/peer_synetune.py runs in Syne Tune's environment and so carries its own copy of the map from a sampled
point to a recorded configuration: it must be the simulator's (`Recording.nearest`), or the two would replay different
configurations for the same point. Pure numpy: no Syne Tune needed here."""

from __future__ import annotations

import random

import numpy as np
import pytest

from bench.search import peer_synetune
from bench.search.problems import PROBLEMS, RECORDED
from bench.search.recording import encode, load


@pytest.mark.parametrize("name", RECORDED)
def test_the_peer_maps_a_point_to_the_recorded_configuration_our_simulator_does(name):
    recording = load(PROBLEMS[name])
    space = {k: p.model_dump(exclude_none=True) for k, p in recording.space.items()}
    params, values, _, maximize = peer_synetune.load_curves(
        str(recording.problem.data_file), recording.metric
    )
    assert params == [c.params for c in recording.curves] and maximize == recording.maximize
    assert np.array_equal(values, np.array([c.values for c in recording.curves]))
    encoded = np.array([peer_synetune.encode(p, space) for p in params])
    assert np.array_equal(encoded, np.array([encode(c.params, recording.space) for c in recording.curves]))
    rng = random.Random(0)
    for _ in range(200):  # points as Syne Tune samples them: every parameter, a conditional one too
        point = {}
        for key, p in space.items():
            if p["type"] == "categorical":
                point[key] = rng.choice(p["choices"])
            elif p["type"] == "int":
                point[key] = rng.randrange(p["low"], p["high"] + 1, p.get("step") or 1)
            else:
                low, high = p["low"], p["high"]
                point[key] = (
                    float(np.exp(rng.uniform(np.log(low), np.log(high))))
                    if p.get("log")
                    else rng.uniform(low, high)
                )
        drawn = {k: v for k, v in point.items() if peer_synetune.condition_holds(space[k].get("when"), point)}
        assert peer_synetune.nearest(encoded, point, space) == recording.nearest(drawn)
