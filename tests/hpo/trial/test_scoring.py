"""Scoring a trial from its evaluations: best or last, direction, NaN evaluations, several objectives."""

from __future__ import annotations

import math

from hpo.trial.scoring import trial_values

EVALS = [
    (4, {"eval_accuracy": 0.70, "eval_loss": 0.9}),
    (8, {"eval_accuracy": math.nan, "eval_loss": math.nan}),
    (12, {"eval_accuracy": 0.85, "eval_loss": 0.5}),
    (16, {"eval_accuracy": 0.80, "eval_loss": 0.4}),
]


def test_best_skips_non_finite_evaluations_and_follows_the_direction() -> None:
    assert trial_values(EVALS, ["eval_accuracy"], ["maximize"], "best") == ([0.85], 12)
    assert trial_values(EVALS, ["eval_loss"], ["minimize"], "best") == ([0.4], 16)
    assert trial_values(EVALS, ["eval_accuracy"], ["maximize"], "last") == ([0.80], 16)


def test_several_objectives_come_from_one_evaluation() -> None:
    # The evaluation chosen by the first objective gives every value: they describe one checkpoint.
    values, step = trial_values(EVALS, ["eval_accuracy", "eval_loss"], ["maximize", "minimize"], "best")
    assert (values, step) == ([0.85, 0.5], 12)


def test_no_usable_evaluation() -> None:
    assert trial_values([], ["eval_accuracy"], ["maximize"], "best") == (None, None)
    values, _ = trial_values(EVALS[1:2], ["eval_accuracy"], ["maximize"], "best")
    assert math.isnan(values[0])  # only a NaN: reported as such, and run_trial turns it into FAIL
