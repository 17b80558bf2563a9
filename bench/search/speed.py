"""How fast this machine runs a recorded problem against the machine that recorded it: real runs (real.py,
crosscheck.py) are judged on the same amount of work, whatever the machine."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from bench.search.record import train_one
from bench.search.recording import Recording
from hpo.spec import load_study_spec


def speed_factor(recording: Recording) -> float:
    """This machine's time for the recording's median-cost configuration over the recorded time (train_one: the
    recording's own code path, one thread). A real run's budget is the simulated one times this, and its times are
    divided by it, so that a machine faster or slower than the recording's is judged on the same amount of work."""
    problem = recording.problem
    costs = recording.full_trial_s()
    index = sorted(range(len(costs)), key=lambda i: costs[i])[len(costs) // 2]
    spec = load_study_spec(problem.study)
    datasets = spec.task.resolve().data(dict(spec.model))
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(
            2
        ):  # the first pays one-time costs (lazy imports, allocator warm-up) that a worker pays once
            recorder = train_one(spec, problem, recording.curves[index].params, 0, Path(folder), datasets)
    assert recorder.began is not None
    measured = recorder.evaluations[-1][1] - recorder.created
    return measured / float(costs[index])
