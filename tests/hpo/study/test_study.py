"""The study manager end to end, in one process: objective best vs last, enqueue, failures, re-runs, summaries."""

from __future__ import annotations

import copy
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from study_task import write_study

import hpo
from hpo.errors import ConfigError, HpoError
from hpo.spec import load_study_spec
from hpo.storage.study_db import open_study
from hpo.study.manager import run_loaded_study, run_study

# With learning rate 0.3 the eval accuracy at steps 4, 8, 12 is about 0.742, 0.844, 0.836: the best is not the last.
NEVER_PRUNES = {
    "type": "threshold",
    "lower": 0.0,
}  # reports every evaluation (intermediate values), prunes nothing


def _study(tmp_path: Path, objective: str) -> optuna.Study:
    path = write_study(
        tmp_path / objective,
        study={
            "n_trials": 1,
            "objective": objective,
            "pruner": NEVER_PRUNES,
            "enqueue": [{"learning_rate": 0.3}],
        },
        search_space={"learning_rate": {"type": "float", "low": 1e-4, "high": 0.5, "log": True}},
    )
    summary = run_study(path, in_process=True)
    return optuna.load_study(study_name="test", storage=summary.storage)


def test_objective_best_versus_last(tmp_path: Path) -> None:
    best = _study(tmp_path, "best").trials[0]
    last = _study(tmp_path, "last").trials[0]
    history = best.intermediate_values
    assert sorted(history) == [4, 8, 12]
    assert max(history.values()) != history[12], "this configuration must peak before its last evaluation"
    assert best.value == max(history.values())
    assert best.user_attrs["best_step"] == max(history, key=history.get)
    assert last.intermediate_values == history  # same seed, same run
    assert last.value == history[12]
    assert last.user_attrs["best_step"] == 12
    # The best checkpoint is the one saved at the best step (saves every 4 steps).
    assert best.user_attrs["best_checkpoint"].endswith(f"trial-0/checkpoint-{best.user_attrs['best_step']}")


def test_enqueued_trials_run_first_and_are_enqueued_once(tmp_path: Path) -> None:
    enqueued = [{"learning_rate": 0.02}, {"learning_rate": 0.003}]
    path = write_study(
        tmp_path,
        study={"n_trials": 3, "pruner": {"type": "none"}, "enqueue": enqueued, "sampler": {"type": "random"}},
    )
    run_study(path, in_process=True)
    summary = run_study(
        path, n_trials=4, in_process=True
    )  # a re-run: the file's enqueue list must not run again
    study = optuna.load_study(study_name="test", storage=summary.storage)
    params = [t.params for t in study.trials]
    assert params[:2] == enqueued
    assert len(params) == 4
    assert all(p not in enqueued for p in params[2:])


def test_n_trials_counts_the_total_over_reruns(tmp_path: Path) -> None:
    path = write_study(tmp_path, study={"n_trials": 2, "pruner": {"type": "none"}})
    first = run_study(path, in_process=True)
    assert first.n_trials == 2
    study = optuna.load_study(study_name="test", storage=first.storage)
    before = [(t.number, t.value, t.params) for t in study.trials]
    again = run_study(path, in_process=True)  # n_trials 2 already reached: nothing runs
    assert again.n_trials == 2
    more = hpo.run_study(path, n_trials=3, in_process=True, training__max_steps=8)  # the package-level API
    assert more.n_trials == 3
    after = optuna.load_study(study_name="test", storage=first.storage).trials
    assert [(t.number, t.value, t.params) for t in after[:2]] == before
    assert after[2].user_attrs["global_step"] == 8  # the keyword override reached the new trial's arguments


def test_failing_trial_is_recorded_and_the_study_goes_on(tmp_path: Path) -> None:
    path = write_study(
        tmp_path,
        study={"n_trials": 2, "pruner": {"type": "none"}, "enqueue": [{"explode": True}, {"explode": False}]},
        search_space={
            "learning_rate": {"type": "fixed", "value": 0.05},
            "explode": {"type": "categorical", "choices": [False, True]},
        },
    )
    summary = run_study(path, in_process=True)
    failed, completed = optuna.load_study(study_name="test", storage=summary.storage).trials
    assert failed.state == TrialState.FAIL
    assert failed.user_attrs["error"] == "RuntimeError: model_init exploded on purpose"
    assert "Traceback" in failed.user_attrs["traceback"] and "model_init" in failed.user_attrs["traceback"]
    assert completed.state == TrialState.COMPLETE
    assert summary.counts == {"COMPLETE": 1, "FAIL": 1}


def test_max_failures_stops_the_study_with_a_clear_message(tmp_path: Path) -> None:
    path = write_study(
        tmp_path,
        study={"n_trials": 5, "pruner": {"type": "none"}, "max_failures": 2},
        search_space={"explode": {"type": "fixed", "value": True}},
    )
    with pytest.raises(HpoError, match=r"2 trials failed .*max_failures = 2.*model_init exploded"):
        run_study(path, in_process=True, dry_run=False)  # the dry run would refuse this model_init already
    spec = load_study_spec(path)
    assert [t.state for t in open_study(spec).trials] == [TrialState.FAIL, TrialState.FAIL]


def test_non_finite_objective_fails_the_trial(tmp_path: Path) -> None:
    path = write_study(
        tmp_path,
        study={"n_trials": 1, "metric": "loss", "direction": "minimize", "pruner": {"type": "none"}},
        search_space={"poison": {"type": "fixed", "value": True}},
    )
    summary = run_study(path, in_process=True)
    trial = optuna.load_study(study_name="test", storage=summary.storage).trials[0]
    assert trial.state == TrialState.FAIL
    assert trial.user_attrs["error"].startswith("non-finite objective")


def test_study_file_and_its_arguments_are_not_mutated_by_a_study(tmp_path: Path) -> None:
    path = write_study(
        tmp_path, study={"n_trials": 3, "pruner": {"type": "none"}, "sampler": {"type": "random"}}
    )
    spec = load_study_spec(path)
    training = copy.deepcopy(spec.training)
    defaults = spec.training_arguments().to_dict()
    run_loaded_study(spec, in_process=True)
    assert spec.training == training
    assert spec.training_arguments().to_dict() == defaults
    lrs = [t.params["learning_rate"] for t in open_study(spec).trials]
    assert len(set(lrs)) == 3 and defaults["learning_rate"] not in lrs


def test_summary_and_pareto_front_for_two_objectives(tmp_path: Path) -> None:
    path = write_study(
        tmp_path,
        study={
            "n_trials": 4,
            "metric": None,
            "direction": None,
            "metrics": ["accuracy", "num_parameters"],
            "directions": ["maximize", "minimize"],
            "sampler": {"type": "nsgaii", "seed": 0, "population_size": 4},
            "pruner": {"type": "none"},
        },
        search_space={"hidden": {"type": "int", "low": 2, "high": 64}},
    )
    summary = run_study(path, in_process=True)
    assert summary.metrics == ["eval_accuracy", "eval_num_parameters"]
    study = optuna.load_study(study_name="test", storage=summary.storage)
    for trial in study.trials:
        hidden = trial.params["hidden"]
        assert trial.values[1] == (8 * hidden + hidden) + (hidden * 3 + 3)  # the MLP's parameter count
    front = {t.number for t in study.best_trials}
    assert {t.number for t in summary.best_trials} == front


def test_storage_override_and_a_stored_study_with_other_directions(tmp_path: Path) -> None:
    path = write_study(tmp_path, study={"n_trials": 1, "pruner": {"type": "none"}})
    other = f"sqlite:///{tmp_path / 'elsewhere' / 'other.db'}"
    summary = run_study(path, storage=other, in_process=True)
    assert summary.storage == other and summary.n_trials == 1
    assert not (tmp_path / "out" / "study.db").exists()  # the file's own storage was not touched
    with pytest.raises(
        ConfigError, match=r"study.direction: the stored study 'test' .* optimises \['maximize'\]"
    ):
        run_study(path, storage=other, in_process=True, set=["study.direction=minimize"])


def test_timeout_stops_starting_trials(tmp_path: Path) -> None:
    path = write_study(
        tmp_path, study={"pruner": {"type": "none"}, "sampler": {"type": "random"}}
    )  # no n_trials
    started = time.monotonic()
    summary = run_study(path, timeout=1.5, in_process=True)
    elapsed = time.monotonic() - started
    assert summary.n_trials >= 1
    assert summary.counts == {"COMPLETE": summary.n_trials}  # the trial running at the deadline finished
    trials = optuna.load_study(study_name="test", storage=summary.storage).trials
    last_start = max(t.datetime_start for t in trials)
    first_start = min(t.datetime_start for t in trials)
    assert (last_start - first_start).total_seconds() < 1.5 + 1.0  # none started long after the deadline
    assert elapsed < 60
