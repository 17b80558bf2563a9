"""A trial on 2 CPU ranks (gloo) forked by a worker: rank 0 owns the Optuna trial, the prune decision reaches both."""

from __future__ import annotations

import time

import pytest
from optuna.trial import TrialState
from study_task import write_study

from hpo.scheduling.pool import run_trials
from hpo.spec import load_study_spec
from hpo.storage.study_db import open_study

pytestmark = pytest.mark.distributed


def test_a_two_rank_trial_is_pruned_on_both_ranks_without_hanging(tmp_path):
    path = write_study(
        tmp_path,
        study={"pruner": {"type": "threshold", "lower": 0.99}},  # accuracy never reaches 0.99: prune at once
        training={"strategy": "ddp", "max_steps": 200, "save_strategy": "no"},
    )
    spec = load_study_spec(path)
    study = open_study(spec)
    started = time.monotonic()
    run_trials(spec, study, n_trials=1, timeout=None, workers=1, ranks_per_trial=2)
    elapsed = time.monotonic() - started
    (trial,) = study.get_trials()
    assert trial.state == TrialState.PRUNED, trial.user_attrs.get("error")
    assert trial.user_attrs["pruned_step"] == 4  # the first evaluation: both ranks stopped there
    assert trial.user_attrs["global_step"] == 4
    assert elapsed < 90, f"took {elapsed:.0f} s: a rank waited on a collective"


def test_a_two_rank_trial_completes_with_the_same_params_on_both_ranks(tmp_path):
    # A sampled layer width: had rank 1 drawn its own, DDP would refuse the mismatched parameter shapes.
    space = {
        "learning_rate": {"type": "float", "low": 1e-3, "high": 0.1, "log": True},
        "hidden": {"type": "int", "low": 4, "high": 64},
    }
    path = write_study(
        tmp_path, search_space=space, training={"strategy": "ddp", "max_steps": 8, "save_strategy": "no"}
    )
    spec = load_study_spec(path)
    study = open_study(spec)
    run_trials(spec, study, n_trials=1, timeout=None, workers=1, ranks_per_trial=2)
    (trial,) = study.get_trials()
    assert trial.state == TrialState.COMPLETE, trial.user_attrs.get("error")
    assert trial.user_attrs["global_step"] == 8
    assert 4 <= trial.params["hidden"] <= 64
