"""`callbacks:` in a study file: each trial gets fresh instances, so early stopping counts from zero in every trial."""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.trial import TrialState
from study_task import write_study

from hpo.study.manager import run_study

TWO_TRIALS = {
    "n_trials": 2,
    "pruner": {"type": "none"},
    "enqueue": [{"learning_rate": 0.01}, {"learning_rate": 0.02}],
}


def _trials(summary) -> list:
    study = optuna.load_study(study_name="test", storage=summary.storage)
    return sorted(study.trials, key=lambda t: t.number)


def test_early_stopping_stops_each_trial_early_with_a_fresh_counter(tmp_path: Path) -> None:
    # threshold 1.0: accuracy never improves by more than 1, so each trial sees 2 evaluations without improvement
    # after its first and stops at step 12 of 40. A counter carried over would stop trial 1 sooner.
    path = write_study(
        tmp_path,
        study=TWO_TRIALS,
        training={"max_steps": 40, "save_strategy": "no"},
        callbacks=[{"early_stopping": {"patience": 2, "threshold": 1.0}}],
    )
    trials = _trials(run_study(path, in_process=True))
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.COMPLETE]
    assert [t.user_attrs["global_step"] for t in trials] == [12, 12]


def test_each_trial_gets_its_own_callback_instances(tmp_path: Path) -> None:
    path = write_study(
        tmp_path,
        study=TWO_TRIALS,
        training={"max_steps": 40, "save_strategy": "no"},
        callbacks=[{"import": "study_task:StopAfterEvaluations", "args": {"evaluations": 2}}],
    )
    trials = _trials(run_study(path, in_process=True))
    assert [t.user_attrs["global_step"] for t in trials] == [
        8,
        8,
    ]  # a shared instance would stop trial 1 at 4


def test_trials_in_this_process_use_threads_per_trial(tmp_path: Path) -> None:
    import torch

    before = torch.get_num_threads()
    path = write_study(
        tmp_path, study={"n_trials": 1, "pruner": {"type": "none"}}, resources={"threads_per_trial": 2}
    )
    (trial,) = _trials(run_study(path, in_process=True))
    assert trial.user_attrs["threads"] == 2
    assert torch.get_num_threads() == before  # restored for whatever runs next in this process


def test_a_run_file_trains_with_its_early_stopping_callback(tmp_path: Path) -> None:
    import yaml

    from hpo.spec import load_run_spec
    from hpo.trial.single_run import run_training

    write_study(tmp_path)  # copies the task module next to the run file
    run = {
        "output_dir": str(tmp_path / "run"),
        "task": {"model_init": "study_task:model_init", "data": "study_task:data"},
        "training": {
            "max_steps": 40,
            "eval_strategy": "steps",
            "eval_steps": 4,
            "save_strategy": "no",
            "metric_for_best_model": "loss",
            "disable_tqdm": True,
        },
        "callbacks": [{"early_stopping": {"patience": 1, "threshold": 10.0}}],
        "tracking": {"store": False},
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(run))
    summary = run_training(load_run_spec(tmp_path / "run.yaml"))
    assert summary["global_step"] == 8  # the evaluation at step 8 did not improve by 10: stopped
