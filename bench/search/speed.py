"""How fast this machine runs a recorded problem against the machine that recorded it: real runs (real.py,
crosscheck.py) are judged on the same amount of work, whatever the machine."""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

import torch

from bench.search.record import train_one
from bench.search.recording import Recording
from hpo.spec import load_study_spec

QUARTILES = (0.25, 0.5, 0.75)  # the configurations timed, by their recorded full cost


def speed_factor(recording: Recording) -> float:
    """This machine's time over the recorded time, the median over three configurations (those at the quartiles of
    the recorded full cost; train_one: the recording's own code path, one thread). A real run's budget is the
    simulated one times this, and its times are divided by it, so that a machine faster or slower than the
    recording's is judged on the same amount of work. One configuration alone (as before) gave factors from 0.06x to
    0.95x across the problems, a short one being mostly fixed costs."""
    problem = recording.problem
    costs = recording.full_trial_s()
    order = sorted(range(len(costs)), key=lambda i: costs[i])
    timed = [order[round(q * (len(order) - 1))] for q in QUARTILES]
    spec = load_study_spec(problem.study)
    datasets = spec.task.resolve().data(dict(spec.model))
    torch.set_num_threads(1)
    ratios = []
    with tempfile.TemporaryDirectory() as folder:
        # A first run pays one-time costs (lazy imports, allocator warm-up) that a worker pays once: not timed.
        train_one(spec, problem, recording.curves[timed[0]].params, 0, Path(folder), datasets)
        for index in timed:
            recorder = train_one(spec, problem, recording.curves[index].params, 0, Path(folder), datasets)
            assert recorder.began is not None
            ratios.append((recorder.evaluations[-1][1] - recorder.created) / float(costs[index]))
    return statistics.median(ratios)
