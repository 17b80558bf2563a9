"""A real run's own pace: its trials' seconds over what the recording says the same work costs.

real.py judges a real run on the recording's clock. It used to convert with `speed.speed_factor`, measured once
before the runs on three configurations; on fresh7-charconst that factor came out 0.69 one time and 0.70 to 0.83 on
four others within minutes (2026-12-04), and the trials of the run it scaled then took 1.07x and 1.22x the recorded
cost of their work (two seeds, medians per trial): every real time came out 7-22 % late, which is where the real
medians sat in the simulator's interval (high, one just outside). The pace is measured on the run itself, under its
own load (two workers, the scheduler, the store), on the work it did: each finished trial's seconds from its claim to
its end against the simulator's cost of the same evaluations (the problem's start cost, the recorded set-up, the
recorded segments up to the evaluations it reached).

A real trial's point is not a recorded configuration. Its cost is taken from the recorded configurations that share
its non-float parameters (sizes, layers, batch: what sets the cost; learning rate and the like do not), their median;
where none does, from the nearest recorded configuration (`Recording.nearest`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from optuna.trial import FrozenTrial

from bench.search.recording import Recording


def cost_key(params: dict[str, Any]) -> tuple:
    """The parameters that set a configuration's cost: all but the floats."""
    return tuple(sorted((name, value) for name, value in params.items() if not isinstance(value, float)))


def recorded_cost(recording: Recording, params: dict[str, Any], evaluations: int, start_s: float) -> float:
    """What the simulator charges a trial with `params` that reached `evaluations` evaluations."""
    key = cost_key(params)
    alike = [i for i, curve in enumerate(recording.curves) if cost_key(curve.params) == key]
    rows = alike or [recording.nearest(params)]
    curves = [recording.curves[i] for i in rows]
    return start_s + statistics.median(c.setup_s + sum(c.segment_s[:evaluations]) for c in curves)


def run_pace(recording: Recording, trials: Iterable[FrozenTrial], start_s: float) -> float | None:
    """Seconds of this run per second of the recording, over its finished trials that evaluated; None: none did."""
    real = recorded = 0.0
    for trial in trials:
        evaluations = len(trial.intermediate_values)
        if trial.datetime_complete is None or trial.datetime_start is None or not evaluations:
            continue
        real += (trial.datetime_complete - trial.datetime_start).total_seconds()
        recorded += recorded_cost(recording, trial.params, evaluations, start_s)
    return real / recorded if recorded else None
