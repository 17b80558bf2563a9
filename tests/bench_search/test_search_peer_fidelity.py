"""bench/search/peer_fidelity.py: the clock SMAC3 and DEHB run on (numpy only, so checked here without either). An
evaluation at fidelity k trains from scratch: it pays the start and the first k recorded segments, reports the values
at evaluations 1..k as they come, and the optimiser is told the value at k; a configuration asked again keeps its
recorded row."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from bench.search.peer_fidelity import Mapper, run_clock

SPACE = {"x": {"type": "float", "low": 0.0, "high": 1.0}}
PARAMS = [{"x": 0.0}, {"x": 0.5}, {"x": 1.0}]
VALUES = np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6], [0.7, 0.8, 0.9]])
SEGMENTS = np.array([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0], [0.5, 0.5, 0.5]])


def test_a_higher_fidelity_is_a_new_evaluation_from_scratch_of_the_same_row():
    asks = iter([({"x": 0.1}, 1), ({"x": 0.1}, 3), ({"x": 0.9}, 2), ({"x": 0.5}, 3)])
    told: list[tuple[int, float]] = []

    def ask():
        configuration, fidelity = next(asks)
        return len(told), configuration, float(fidelity)

    options = argparse.Namespace(workers=1, budget_s=6.0, start_s=0.25)
    run = run_clock(
        ask,
        lambda handle, value: told.append((handle, value)),
        Mapper(SPACE, PARAMS),
        VALUES,
        SEGMENTS,
        options,
    )
    # row 0 at 1 evaluation: 0.25 + 1 (1.25); again at 3, from scratch: 1.25 + 0.25 + 1, 2, 3 (2.5, 3.5, 4.5);
    # row 2 (x=0.9) at 2: 4.5 + 0.25 + 0.5, 1.0 (5.25, 5.75); row 1 then starts and is in flight at the budget
    assert run["trace"] == [[1.25, 0.1], [2.5, 0.1], [3.5, 0.2], [4.5, 0.3], [5.25, 0.7], [5.75, 0.8]]
    assert [value for _, value in told] == [0.1, 0.3, 0.8]
    assert run["trials"] == 3 and run["resumes"] == 0
    assert run["busy_s"] == pytest.approx(6.0)
