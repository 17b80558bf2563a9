"""The simulated clock for optimisers that ask for (configuration, fidelity) and are told a score: SMAC3 with its
Hyperband intensifier (peer_smac.py) and DEHB (peer_dehb.py). Runs in their environment: numpy and the recording only.

Their interface is an objective function of a configuration and a budget, and neither library resumes a trial: a
configuration asked at a higher budget after a lower one is a new evaluation from scratch (their examples train anew;
a user would have to add checkpoints by hand). So an evaluation at fidelity k (k recorded evaluations) costs the
problem's start cost, the recorded set-up and the first k recorded segments, and reports the values at evaluations
1..k as they come (each one counts toward the best-so-far at its time, as in our simulator); the optimiser is told
the value at evaluation k (its cost: minus the metric when it is maximised). A configuration asked again (a
promotion) replays the same recorded row; a new one goes to the nearest recorded configuration not yet run, as every
simulator here maps (peer_synetune.nearest). N workers ask as soon as they are free; the run stops at the budget.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_synetune import encode, load_curves, nearest  # noqa: E402

# ask() -> (handle, configuration as a dict, fidelity in evaluations); tell(handle, value at that fidelity)
Ask = Callable[[], tuple[Any, dict[str, Any], float]]
Tell = Callable[[Any, float], None]


@dataclass
class Mapper:
    """Each configuration asked keeps its recorded row; a new one takes the nearest row not yet used."""

    space: dict[str, dict[str, Any]]
    params: list[dict[str, Any]]
    rows: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.encoded = np.array([encode(p, self.space) for p in self.params])

    def row(self, configuration: dict[str, Any]) -> int:
        key = json.dumps(configuration, sort_keys=True, default=str)
        if key not in self.rows:
            self.rows[key] = nearest(self.encoded, configuration, self.space, list(self.rows.values()))
        return self.rows[key]


def run_clock(
    ask: Ask,
    tell: Tell,
    mapper: Mapper,
    values: np.ndarray,
    segments: np.ndarray,
    options: argparse.Namespace,
) -> dict[str, Any]:
    """One seed: workers evaluate what `ask` gives until the budget; returns the run as the peers' JSON holds it."""
    evaluations = values.shape[1]
    events: list[tuple[float, int, int]] = []  # (time the evaluation ends, sequence, job index)
    jobs: list[tuple[Any, int, int, float]] = []  # (handle, row, fidelity, start time)
    trace: list[list[float]] = []
    busy, asked = 0.0, 0

    def start(at: float) -> None:
        nonlocal asked
        handle, configuration, fidelity = ask()
        asked += 1
        k = max(1, min(evaluations, math.ceil(fidelity - 1e-9)))
        row = mapper.row(configuration)
        jobs.append((handle, row, k, at))
        heapq.heappush(
            events, (at + options.start_s + float(segments[row, :k].sum()), len(jobs), len(jobs) - 1)
        )

    for _ in range(options.workers):
        start(0.0)
    while events and events[0][0] <= options.budget_s:
        end, _, index = heapq.heappop(events)
        handle, row, k, began = jobs[index]
        marks = began + options.start_s + np.cumsum(segments[row, :k])
        trace += [[float(t), float(v)] for t, v in zip(marks, values[row, :k], strict=True)]
        busy += end - began
        tell(handle, float(values[row, k - 1]))
        start(end)
    for _, _, index in events:  # work in flight at the budget: its evaluations before the budget were seen
        handle, row, k, began = jobs[index]
        marks = began + options.start_s + np.cumsum(segments[row, :k])
        trace += [
            [float(t), float(v)] for t, v in zip(marks, values[row, :k], strict=True) if t <= options.budget_s
        ]
        busy += options.budget_s - began
    trace.sort()
    return {
        "trace": trace,
        "trials": len(mapper.rows),
        "resumes": 0,
        "evaluations": len(trace),
        "busy_s": busy,
    }


def arguments(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", required=True, help="the recording, bench/search/data/<problem>.json.gz")
    parser.add_argument("--space", required=True, help="the study's sampled_params() as JSON")
    parser.add_argument("--metric", required=True)
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--budget-s", type=float, required=True)
    parser.add_argument("--start-s", type=float, default=0.0)
    parser.add_argument("--eta", type=int, default=3)
    parser.add_argument("--min-fidelity", type=int, default=1, help="the first rung, in evaluations")
    parser.add_argument("--seeds", type=int, default=30)
    return parser


def recording(options: argparse.Namespace) -> tuple[list[dict[str, Any]], np.ndarray, np.ndarray, bool]:
    return load_curves(options.data, options.metric)
