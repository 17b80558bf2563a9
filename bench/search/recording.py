"""A recorded problem in memory: each configuration's curve, and the map from a sampled configuration to a recorded one.

Mapping (why nearest neighbour): the methods sample from the study's real search space, through hpo's own
`sample_params` on an Optuna trial, so TPE models the real parameters (log scales, integer steps, the conditional
dropout) exactly as in `hpo run`. An Optuna distribution over recorded indices would hand TPE a categorical with no
order, which is not the method being benchmarked. A sampled point is then replayed as the recorded configuration
nearest to it: each numeric parameter scaled to [0, 1] over its range (in log space when `log: true`), a categorical
as a one-hot vector, a conditional parameter that is absent as 0 plus an "absent" flag; Euclidean distance, ties to
the lower index. With a few hundred recorded points in six dimensions the map is coarse, so the benchmark compares
methods on this table of configurations (a discretised problem, as tabular benchmarks are), not on the continuous one.

Each recorded configuration replays at most once in a run (`taken`): a sampled point goes to the nearest configuration
the run has not started yet, and only once every one has been started may a configuration replay again. Without it,
two distinct points that fall in one configuration's cell replayed the same curve twice, a trial that teaches a
sampler nothing, where in a real run the second point is a new configuration near the first with its own outcome. A
sampler that concentrates (TPE after its start-up, the multi-fidelity TPE more so) paid for it most: on MiniLM the
default method replayed 18.6 of its 38 trials, random search 5.2 of 29. Tabular benchmarks have searchers draw only
unseen rows for the same reason (Syne Tune's `allow_duplicates=False` over `restrict_configurations`).
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Collection
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from bench.search.problems import Problem
from hpo.spec import load_study_spec, metric_key
from hpo.spec.search_space import ParamSpec


@dataclass(frozen=True)
class Curve:
    params: dict[str, Any]
    setup_s: float  # Trainer, model and optimizer built, before the first step
    segment_s: tuple[
        float, ...
    ]  # seconds from the previous evaluation (or the first step) to the end of this one
    values: tuple[float, ...]  # the study's metric at each evaluation
    losses: tuple[float, ...]


@dataclass(frozen=True)
class Recording:
    problem: Problem
    steps: tuple[int, ...]  # the global step of each evaluation
    metric: str
    maximize: bool
    objective: str  # "best" or "last": how a trial trained to the end is scored
    curves: tuple[Curve, ...]
    conditions: dict[str, Any]
    space: dict[str, ParamSpec]

    def final(self, index: int) -> float:
        """The configuration's score trained to the end, as the study scores a trial (its best or last evaluation)."""
        values = self.curves[index].values
        if self.objective == "last":
            return values[-1]
        return max(values) if self.maximize else min(values)

    def finals(self) -> np.ndarray:
        return np.array([self.final(i) for i in range(len(self.curves))])

    def target(self, quantile: float) -> float:
        """The `quantile` (0.9: better than 90 %) of the recorded final scores, in the direction of the study."""
        q = quantile if self.maximize else 1.0 - quantile
        return float(np.quantile(self.finals(), q))

    def regret_scale(self) -> tuple[float, float]:
        """(best, median) of the recorded final scores: the ends of the normalised regret (figures.regret_area)."""
        finals = self.finals()
        best = float(finals.max() if self.maximize else finals.min())
        return best, float(np.median(finals))

    def full_trial_s(self) -> np.ndarray:
        return np.array([c.setup_s + sum(c.segment_s) for c in self.curves])

    def better(self, a: float, b: float) -> bool:
        return a > b if self.maximize else a < b

    @cached_property
    def _encoded(self) -> np.ndarray:
        return np.array([encode(c.params, self.space) for c in self.curves])

    def nearest(self, params: dict[str, Any], taken: Collection[int] = ()) -> int:
        """The recorded configuration nearest to `params`, among those not in `taken` while any is left."""
        distances = np.linalg.norm(self._encoded - np.array(encode(params, self.space)), axis=1)
        return nearest_untaken(distances, taken)


def nearest_untaken(distances: np.ndarray, taken: Collection[int]) -> int:
    """argmin of `distances` over the rows not in `taken` (all rows once every one is taken); ties to the lower
    index. bench/search/peer_synetune.py keeps a copy (it runs in Syne Tune's environment, without this package)."""
    rows = sorted(set(taken))
    if rows and len(rows) < len(distances):
        distances = distances.copy()
        distances[rows] = np.inf
    return int(np.argmin(distances))  # argmin: the first of equal distances


def encode(params: dict[str, Any], space: dict[str, ParamSpec]) -> list[float]:
    """A point of the search space as a vector whose coordinates all lie in [0, 1] (see the module's docstring)."""
    vector: list[float] = []
    for name, param in space.items():
        present = name in params
        if param.type == "categorical":
            choices = list(param.choices or [])
            vector += [1.0 if present and params[name] == c else 0.0 for c in choices]
        else:
            low, high, value = float(param.low), float(param.high), float(params.get(name, param.low))
            if param.log:
                low, high, value = math.log(low), math.log(high), math.log(value)
            vector.append((value - low) / (high - low) if present and high > low else 0.0)
        if param.when:
            vector.append(0.0 if present else 1.0)
    return vector


def load(problem: Problem, path: Path | None = None) -> Recording:
    with gzip.open(path or problem.data_file, "rt", encoding="utf-8") as stored:
        data = json.load(stored)
    spec = load_study_spec(problem.study)
    metric = metric_key((spec.study.metrics or ["eval_loss"])[0])  # accuracy -> eval_accuracy
    curves = tuple(
        Curve(
            params=c["params"],
            setup_s=c["setup_s"],
            segment_s=tuple(c["segment_s"]),
            values=tuple(c[metric]),
            losses=tuple(c["eval_loss"]),
        )
        for c in data["configurations"]
    )
    return Recording(
        problem=problem,
        steps=tuple(data["steps"]),
        metric=metric,
        maximize=data["direction"] == "maximize",
        objective=data["objective"],
        curves=curves,
        conditions=data["conditions"],
        space=dict(spec.sampled_params()),
    )
