"""Tracking in real studies: the Trainer's log records, the events of pruned/failed/retried trials, wandb runs."""

from __future__ import annotations

import json
import socket
import subprocess

import optuna
import pytest
from study_task import write_study
from wandb_files import offline_runs

from hpo.spec import load_study_spec
from hpo.storage.study_db import open_study
from hpo.study.manager import run_study
from hpo.tracking import RunInfo, build_tracking_callbacks, finish_tracking
from hpo.tracking.logs import numeric_items
from hpo.tracking.store import open_store
from trainer import Trainer


def run_in_process(path, n_trials: int) -> None:
    """The study, one trial after another in this process (the scheduler's subprocess path has its own slow test)."""
    run_study(str(path), n_trials=n_trials, in_process=True)


def test_every_log_record_of_a_trial_is_in_the_metrics_table(tmp_path):
    import study_task

    spec = load_study_spec(write_study(tmp_path, tracking={"store": True}))
    run = RunInfo(
        kind="trial",
        study_name="test",
        trial_number=0,
        params={"hidden": 16},
        output_dir=str(tmp_path / "t0"),
    )
    callbacks = build_tracking_callbacks(spec, run=run)
    train, evaluation = study_task.data({})
    trainer = Trainer(
        model=study_task.model_init({}),
        args=spec.training_arguments(str(tmp_path / "t0"), logging_steps=1),
        train_dataset=train,
        eval_dataset=evaluation,
        compute_metrics=study_task.compute_metrics,
        callbacks=callbacks,
    )
    trainer.train()
    finish_tracking(callbacks, status="completed", values=[0.9], best_step=4)

    store = open_store(spec.store_url)
    stored = sorted((m["step"], m["name"], m["value"], m["epoch"]) for m in store.metrics("test/trial-0"))
    expected = sorted(
        (record["step"], name, value, record.get("epoch"))
        for record in trainer.state.log_history
        for name, value in numeric_items(record).items()
    )
    assert len(expected) > 12 * 5, "the run should have logged every step and evaluated three times"
    assert [row[:2] for row in stored] == [row[:2] for row in expected]
    assert [row[2] for row in stored] == pytest.approx([row[2] for row in expected])
    assert [row[3] for row in stored] == pytest.approx([row[3] for row in expected])
    assert {row[1] for row in stored} >= {"loss", "learning_rate", "eval_accuracy", "eval_loss"}

    row = store.run("test/trial-0")
    assert row["status"] == "completed" and row["objective"] == 0.9 and row["extra"]["best_step"] == 4
    assert row["arguments"]["logging_steps"] == 1 and row["params"] == {"hidden": 16}
    assert row["state"]["global_step"] == 12 and row["host"] == socket.gethostname()
    assert row["packages"]["torch"] and row["git_commit"]
    steps = sorted(a["step"] for a in store.artifacts("test/trial-0", kind="checkpoint"))
    assert steps == [4, 8, 12] and all(len(a["sha256"]) == 64 for a in store.artifacts("test/trial-0"))


def test_pruned_and_failed_trials_leave_their_events(tmp_path):
    path = write_study(
        tmp_path,
        study={
            "n_trials": 3,
            # No evaluation reaches 99% accuracy, so the threshold pruner stops a trial at its first evaluation.
            "pruner": {"type": "threshold", "options": {"lower": 0.99}},
            "enqueue": [{"learning_rate": 0.01, "explode": False}, {"learning_rate": 0.01, "explode": True}],
        },
        search_space={
            "learning_rate": {"type": "float", "low": 1.0e-4, "high": 0.1, "log": True},
            "explode": {"type": "categorical", "choices": [False, True]},  # True: model_init raises
        },
        tracking={"store": True},
    )
    run_in_process(path, n_trials=2)
    spec = load_study_spec(path)
    store = open_store(spec.store_url)

    pruned = store.run("test/trial-0")
    kinds = [e["kind"] for e in store.events("test/trial-0")]
    assert pruned["status"] == "pruned" and kinds == ["started", "evaluated", "pruned"]
    assert store.events("test/trial-0", kind="pruned")[0]["data"]["best_step"] == 4

    failed = store.run("test/trial-1")
    (event,) = store.events("test/trial-1", kind="failed")
    assert failed["status"] == "failed" and failed["extra"]["error"] == event["message"]
    assert "model_init exploded on purpose" in event["message"]


def test_a_trial_whose_data_raises_ends_its_store_run_failed(tmp_path):
    """data() ran before the store callback existed, so its failure reached no store: a PBT member resumed after a
    pause whose data() raised kept its run "paused" while the trial was FAIL (tests/chaos/campaign.py seed 758930)."""
    path = write_study(
        tmp_path,
        study={"n_trials": 1, "enqueue": [{"learning_rate": 0.01, "data_explodes": True}]},
        search_space={
            "learning_rate": {"type": "float", "low": 1.0e-4, "high": 0.1, "log": True},
            "data_explodes": {"type": "categorical", "choices": [False, True]},
        },
        tracking={"store": True},
    )
    run_in_process(path, n_trials=1)
    store = open_store(load_study_spec(path).store_url)
    run = store.run("test/trial-0")
    assert run is not None and run["status"] == "failed"
    (event,) = store.events("test/trial-0", kind="failed")
    assert "data exploded on purpose" in event["message"]


def resume_point_of(spec, folder: str) -> None:
    import study_task

    train, evaluation = study_task.data({})
    args = spec.training_arguments(folder, max_steps=8, learning_rate=0.01)
    Trainer(model=study_task.model_init({}), args=args, train_dataset=train, eval_dataset=evaluation).train()


def test_a_retried_trial_records_retried_and_resumed(tmp_path):
    path = write_study(tmp_path, study={"n_trials": 1}, tracking={"store": True})
    spec = load_study_spec(path)
    study = open_study(spec)
    crashed = study.ask({"learning_rate": optuna.distributions.FloatDistribution(1e-4, 0.1, log=True)})
    resume_point_of(spec, spec.trial_dir(0))  # it saved checkpoints 4 and 8 before it died
    dead = subprocess.Popen(["true"])
    dead.wait()  # a process that no longer exists ran this trial: it is stale
    for key, value in {"host": socket.gethostname(), "pid": dead.pid, "run_dir": spec.trial_dir(0)}.items():
        crashed.set_user_attr(key, value)

    run_in_process(path, n_trials=1)

    store = open_store(spec.store_url)
    (retry_event,) = store.events("test/trial-1", kind="retried")
    assert retry_event["data"]["requeued_from_trial"] == 0 and retry_event["message"].startswith(
        "retry of trial-0"
    )
    assert store.run("test/trial-0")["status"] == "failed"
    assert store.run("test/trial-1")["status"] == "completed"
    (resumed,) = store.events("test/trial-1", kind="resumed")
    assert resumed["data"]["global_step"] == 8 and retry_event["data"]["resume_from"].endswith("checkpoint-8")
    assert min(m["step"] for m in store.metrics("test/trial-1", name="loss")) > 8


def test_one_offline_wandb_run_per_trial_with_group_config_and_summary(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)  # the mode must default to offline without an API key
    path = write_study(
        tmp_path,
        study={
            "n_trials": 3,
            "pruner": {"type": "none"},
            "enqueue": [
                {"explode": False, "learning_rate": 0.01},
                {"explode": False, "learning_rate": 0.02},
                {"explode": True, "learning_rate": 0.01},
            ],
        },
        search_space={
            "learning_rate": {"type": "float", "low": 1.0e-3, "high": 0.05, "log": True},
            "explode": {"type": "categorical", "choices": [False, True]},
        },
        tracking={"store": False, "wandb": {"project": "tracking-test", "tags": ["ci"]}},
    )
    run_in_process(path, n_trials=3)  # one worker: each wandb run must be finished before the next trial
    study = optuna.load_study(study_name="test", storage=load_study_spec(path).storage)

    runs = offline_runs(tmp_path / "out")
    assert [r.name for r in runs] == ["trial-0", "trial-1", "trial-2"]
    for run, trial in zip(runs, study.trials, strict=True):
        assert (run.group, run.project, run.tags) == ("test", "tracking-test", ["ci"])
        assert run.config["params"] == trial.params
        if trial.state == optuna.trial.TrialState.COMPLETE:
            assert run.config["arguments"]["learning_rate"] == pytest.approx(trial.params["learning_rate"])
            assert run.summary["state"] == "complete" and run.exit_code == 0
            assert run.summary["objective"] == pytest.approx(trial.value)
            assert run.summary["best_step"] == trial.user_attrs["best_step"]
            steps = [h["_step"] for h in run.history]
            assert steps == sorted(steps) and steps[-1] == 12 and "eval_accuracy" in json.dumps(run.history)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE", "FAIL"]
    assert runs[2].summary["state"] == "failed" and runs[2].exit_code == 1


@pytest.mark.slow
def test_parallel_trial_processes_record_every_trial(tmp_path):
    """`hpo run` with 2 workers: trials in their own processes write to one store at the same time; none is lost."""
    path = write_study(tmp_path, study={"n_trials": 4, "pruner": {"type": "none"}}, tracking={"store": True})
    run_study(str(path), workers=2)
    spec = load_study_spec(path)
    study = optuna.load_study(study_name="test", storage=spec.storage)
    store = open_store(spec.store_url)

    for trial in study.trials:
        run_id = f"test/trial-{trial.number}"
        row = store.run(run_id)
        assert row["status"] == "completed" and row["objective"] == pytest.approx(trial.value)
        assert [e["kind"] for e in store.events(run_id)] == [
            "started",
            "evaluated",
            "evaluated",
            "evaluated",
            "completed",
        ]
        assert sorted({m["step"] for m in store.metrics(run_id, name="loss")}) == [4, 8, 12]


@pytest.mark.postgres
def test_a_postgres_study_keeps_its_store_in_the_same_database(tmp_path, postgres_url, unique_study):
    path = write_study(
        tmp_path,
        study={"name": unique_study, "storage": postgres_url, "n_trials": 1, "pruner": {"type": "none"}},
        tracking={"store": True},
    )
    spec = load_study_spec(path)
    assert spec.store_url == postgres_url

    run_in_process(path, n_trials=1)

    store = open_store(postgres_url)
    row = store.run(f"{unique_study}/trial-0")
    assert row["status"] == "completed" and row["study_name"] == unique_study
    assert {m["name"] for m in store.metrics(f"{unique_study}/trial-0")} >= {"loss", "eval_accuracy"}
    assert not (tmp_path / "out" / "experiments.db").exists()
