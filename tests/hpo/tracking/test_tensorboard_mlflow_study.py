"""A study with TensorBoard and MLflow on: one run per trial in each, read back with TensorBoard's EventAccumulator and
MLflow's client (a SQLite tracking store), with the trial's parameters, curves, state and value; a retried trial
continues its first attempt's run in both."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import mlflow
import optuna
import pytest
from study_task import write_study
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2

from hpo.errors import ConfigError
from hpo.spec import load_study_spec
from hpo.storage.study_db import open_study
from hpo.study.manager import run_study
from hpo.tracking import RunInfo, build_tracking_callbacks, finish_tracking
from trainer import Trainer

SPACE = {
    "learning_rate": {"type": "float", "low": 1.0e-3, "high": 0.05, "log": True},
    "explode": {"type": "categorical", "choices": [False, True]},  # True: model_init raises
}


def tensorboard_run(folder: Path) -> EventAccumulator:
    return EventAccumulator(str(folder)).Reload()


def hparams_of(run: EventAccumulator) -> dict:
    content = run.summary_metadata["_hparams_/session_start_info"].plugin_data.content
    data = plugin_data_pb2.HParamsPluginData.FromString(content)
    return {
        k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind"))
        for k, v in data.session_start_info.hparams.items()
    }


def mlflow_client(spec) -> mlflow.MlflowClient:
    return mlflow.MlflowClient(f"sqlite:///{Path(spec.output_dir).resolve() / 'mlflow.db'}")


@pytest.fixture(autouse=True)
def fresh_mlflow(monkeypatch):
    """No tracking URI from the environment or an earlier test: the study's own default applies."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)


def test_one_tensorboard_run_and_one_nested_mlflow_run_per_trial(tmp_path):
    path = write_study(
        tmp_path,
        study={
            "n_trials": 3,
            "pruner": {"type": "none"},
            "enqueue": [
                {"learning_rate": 0.01, "explode": False},
                {"learning_rate": 0.02, "explode": False},
                {"learning_rate": 0.01, "explode": True},
            ],
        },
        search_space=SPACE,
        tracking={"store": False, "tensorboard": True, "mlflow": True},
    )
    run_study(str(path), n_trials=3, in_process=True)
    spec = load_study_spec(path)
    trials = optuna.load_study(study_name="test", storage=spec.storage).trials

    folders = sorted(p.name for p in (Path(spec.output_dir) / "tensorboard").iterdir())
    assert folders == ["trial-0", "trial-1", "trial-2"]
    for trial in trials[:2]:
        run = tensorboard_run(Path(spec.output_dir) / "tensorboard" / f"trial-{trial.number}")
        assert hparams_of(run) == pytest.approx(trial.params)
        assert [e.step for e in run.Scalars("eval/accuracy")] == [4, 8, 12]
        [value] = run.Scalars("hpo/value")
        assert value.value == pytest.approx(trial.value) and value.step == trial.user_attrs["best_step"]
        assert "_hparams_/session_end_info" in run.summary_metadata
        content = run.summary_metadata["_hparams_/experiment"].plugin_data.content
        experiment = plugin_data_pb2.HParamsPluginData.FromString(content).experiment  # the view's columns
        assert [h.name for h in experiment.hparam_infos] == ["learning_rate", "explode"]
        assert [m.name.tag for m in experiment.metric_infos][:2] == ["hpo/value", "eval/accuracy"]

    client = mlflow_client(spec)
    experiment = client.get_experiment_by_name("test").experiment_id
    [parent] = client.search_runs([experiment], "tags.`hpo.role` = 'study'")
    children = client.search_runs([experiment], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    by_name = {run.info.run_name: run for run in children}
    assert sorted(by_name) == ["trial-0", "trial-1", "trial-2"]
    for trial in trials:
        run = by_name[f"trial-{trial.number}"]
        assert run.data.params["learning_rate"] == str(trial.params["learning_rate"])
        assert run.data.tags["state"] == {"COMPLETE": "completed", "FAIL": "failed"}[trial.state.name]
    done = by_name["trial-0"]
    assert done.info.status == "FINISHED" and done.data.metrics["value"] == pytest.approx(trials[0].value)
    history = client.get_metric_history(done.info.run_id, "eval_accuracy")
    assert [m.step for m in history] == [4, 8, 12]
    assert by_name["trial-2"].info.status == "FAILED" and "exploded" in by_name["trial-2"].data.tags["error"]


def test_a_pruned_trial_records_its_pruned_step(tmp_path):
    path = write_study(
        tmp_path,
        study={"n_trials": 1, "pruner": {"type": "threshold", "options": {"lower": 0.99}}},
        tracking={"store": False, "tensorboard": True, "mlflow": True},
    )
    run_study(str(path), n_trials=1, in_process=True)
    spec = load_study_spec(path)
    run = tensorboard_run(Path(spec.output_dir) / "tensorboard" / "trial-0")
    assert [e.value for e in run.Scalars("hpo/pruned_step")] == [4]
    [child] = mlflow_client(spec).search_runs(
        [mlflow_client(spec).get_experiment_by_name("test").experiment_id], "tags.`hpo.trial` = '0'"
    )
    assert child.data.tags["state"] == "pruned" and child.data.metrics["pruned_step"] == 4


def test_a_retried_trial_continues_its_first_attempts_runs(tmp_path):
    path = write_study(
        tmp_path, study={"n_trials": 1}, tracking={"store": False, "tensorboard": True, "mlflow": True}
    )
    spec = load_study_spec(path)
    study = open_study(spec)
    crashed = study.ask({"learning_rate": optuna.distributions.FloatDistribution(1e-4, 0.1, log=True)})
    first = RunInfo(
        kind="trial", study_name="test", trial_number=0, params=crashed.params, output_dir=spec.trial_dir(0)
    )
    callbacks = build_tracking_callbacks(spec, run=first)
    import study_task

    train, evaluation = study_task.data({})
    args = spec.training_arguments(
        spec.trial_dir(0), max_steps=8, learning_rate=crashed.params["learning_rate"]
    )
    Trainer(
        model=study_task.model_init({}),
        args=args,
        train_dataset=train,
        eval_dataset=evaluation,
        callbacks=callbacks,
    ).train()
    finish_tracking(
        callbacks, status="failed", error="the worker died"
    )  # what the crash leaves: checkpoints 4, 8
    dead = subprocess.Popen(["true"])
    dead.wait()
    for key, value in {"host": socket.gethostname(), "pid": dead.pid, "run_dir": spec.trial_dir(0)}.items():
        crashed.set_user_attr(key, value)

    run_study(str(path), n_trials=1, in_process=True)

    [retry] = [t for t in optuna.load_study(study_name="test", storage=spec.storage).trials if t.number == 1]
    assert retry.user_attrs["retry_root"] == 0 and retry.state.name == "COMPLETE"
    assert [p.name for p in (Path(spec.output_dir) / "tensorboard").iterdir()] == ["trial-0"]
    run = tensorboard_run(Path(spec.output_dir) / "tensorboard" / "trial-0")
    assert [e.step for e in run.Scalars("train/loss")] == [4, 8, 12]  # no step twice
    assert run.Scalars("hpo/value")[-1].value == pytest.approx(retry.value)
    client = mlflow_client(spec)
    runs = client.search_runs([client.get_experiment_by_name("test").experiment_id])
    [child] = [run for run in runs if run.data.tags.get("hpo.role") != "study"]
    assert child.info.run_name == "trial-0" and child.data.tags["state"] == "completed"
    assert child.info.status == "FINISHED" and child.data.metrics["value"] == pytest.approx(retry.value)
    assert [m.step for m in client.get_metric_history(child.info.run_id, "loss")] == [4, 8, 12]


def test_report_to_in_a_study_points_to_the_tracking_section(tmp_path):
    path = write_study(tmp_path, training={"report_to": ["tensorboard"]})
    with pytest.raises(ConfigError, match=r"training\.report_to: .*set tracking\.tensorboard: true instead"):
        load_study_spec(path)


def test_an_mlflow_store_that_fails_costs_the_mlflow_run_not_the_trial(tmp_path):
    path = write_study(
        tmp_path,
        study={"n_trials": 1},
        tracking={"store": False, "mlflow": {"tracking_uri": "nosuchscheme://nowhere"}},
    )
    run_study(str(path), n_trials=1, in_process=True)
    [trial] = optuna.load_study(study_name="test", storage=load_study_spec(path).storage).trials
    assert trial.state.name == "COMPLETE"


@pytest.mark.slow
def test_two_workers_share_one_new_mlflow_store(tmp_path):
    """Two trial processes that open a new SQLite store at once both get their runs (MLflow's migrations, run side by
    side, failed trials with "duplicate column name" before the store's creation took a lock)."""
    path = write_study(tmp_path, study={"n_trials": 4}, tracking={"store": False, "mlflow": True})
    run_study(str(path), n_trials=4, workers=2)
    spec = load_study_spec(path)
    trials = optuna.load_study(study_name="test", storage=spec.storage).trials
    assert len(trials) == 4 and not [t for t in trials if t.state.name == "FAIL"]
    client = mlflow_client(spec)
    runs = client.search_runs([client.get_experiment_by_name("test").experiment_id])
    assert sorted(r.info.run_name for r in runs if r.data.tags.get("hpo.role") != "study") == [
        f"trial-{t.number}" for t in trials
    ]
    assert len([r for r in runs if r.data.tags.get("hpo.role") == "study"]) == 1


def test_a_paused_trial_resumed_continues_its_runs(tmp_path):
    """A trial paused at a rung (ASHA, PBT) ends its piece as "paused" and a later piece, resumed from its checkpoint,
    goes on in the same TensorBoard folder and the same MLflow run."""
    import study_task

    path = write_study(tmp_path, tracking={"store": False, "tensorboard": True, "mlflow": True})
    spec = load_study_spec(path)
    run = RunInfo(
        kind="trial",
        study_name="test",
        trial_number=0,
        params={"learning_rate": 0.01},
        output_dir=spec.trial_dir(0),
    )
    train, evaluation = study_task.data({})
    for steps, status, resume in ((8, "paused", None), (12, "completed", True)):
        callbacks = build_tracking_callbacks(spec, run=run)
        args = spec.training_arguments(spec.trial_dir(0), max_steps=steps, learning_rate=0.01)
        trainer = Trainer(
            model=study_task.model_init({}),
            args=args,
            train_dataset=train,
            eval_dataset=evaluation,
            callbacks=callbacks,
        )
        trainer.train(resume_from_checkpoint=resume)
        finish_tracking(
            callbacks, status=status, values=[0.5] if status == "completed" else None, best_step=12
        )

    folder = Path(spec.output_dir) / "tensorboard" / "trial-0"
    events = tensorboard_run(folder)
    assert [e.step for e in events.Scalars("eval/loss")] == [4, 8, 12]
    assert [e.value for e in events.Scalars("hpo/value")] == [0.5]
    client = mlflow_client(spec)
    runs = client.search_runs([client.get_experiment_by_name("test").experiment_id])
    [child] = [r for r in runs if r.data.tags.get("hpo.role") != "study"]
    assert child.info.status == "FINISHED" and child.data.tags["state"] == "completed"
    assert [m.step for m in client.get_metric_history(child.info.run_id, "eval_loss")] == [4, 8, 12]
