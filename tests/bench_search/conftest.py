"""A small hand-made recording over the digits study's real search space: the simulator's tests run in milliseconds
and do not depend on the recorded data file."""

from __future__ import annotations

import random

import optuna
import pytest

from bench.search.problems import ROOT, Problem
from bench.search.recording import Curve, Recording
from hpo.spec import load_study_spec
from hpo.trial.space import sample_params

TINY = Problem(
    name="tiny",
    study=ROOT / "studies" / "digits_mlp.yaml",
    configurations=40,
    draw_seed=7,
    steps=9,
    eval_every=1,
    n_trials=8,
    workers=2,
    asha_levels=(1, 3),
    eta=3,
    pruner_min_steps=1,
)


def tiny_recording(problem: Problem = TINY) -> Recording:
    spec = load_study_spec(problem.study)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=problem.draw_seed))
    rng = random.Random(problem.draw_seed)
    curves = []
    for _ in range(problem.configurations):
        trial = study.ask()
        params = sample_params(trial, spec.search_space)
        study.tell(trial, 0.0)
        ceiling, speed = rng.uniform(0.8, 0.99), rng.uniform(0.2, 0.9)
        values = tuple(
            round(ceiling * (1 - (1 - speed) ** (k + 1)), 4) for k in range(len(problem.rung_steps))
        )
        segments = tuple(round(rng.uniform(0.05, 0.2), 3) for _ in problem.rung_steps)
        curves.append(Curve(params, round(rng.uniform(0.0, 0.05), 3), segments, values, values))
    return Recording(
        problem=problem,
        steps=tuple(problem.rung_steps),
        metric="eval_accuracy",
        maximize=True,
        objective="best",
        curves=tuple(curves),
        conditions={},
        space=dict(spec.sampled_params()),
    )


@pytest.fixture(scope="session")
def recording() -> Recording:
    return tiny_recording()
