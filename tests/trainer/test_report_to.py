"""`report_to`, value by value, as transformers does it: what each integration writes, read back with its own reader
(TensorBoard's EventAccumulator, MLflow's client on a SQLite store, wandb's offline run file), and the refusals."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mlflow_store import fresh_mlflow_store
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from trainer_tasks import Regression, make_model, quiet_args
from wandb_files import offline_runs

from trainer import MLflowCallback, TensorBoardCallback, Trainer, TrainerConfigError, WandbCallback
from trainer.integrations import INTEGRATION_TO_CALLBACK
from trainer.report_to import INTEGRATIONS, available_integrations

TRAINING = dict(max_steps=6, logging_steps=2, eval_strategy="steps", eval_steps=3, run_name="reported")


def train(tmp_path: Path, report_to, **fields) -> Trainer:
    args = quiet_args(tmp_path / "out", report_to=report_to, **{**TRAINING, **fields})
    trainer = Trainer(
        model=make_model(), args=args, train_dataset=Regression(32), eval_dataset=Regression(16)
    )
    trainer.train()
    return trainer


def tensorboard_runs(folder: Path) -> list[EventAccumulator]:
    runs = sorted({event.parent for event in folder.rglob("events.out.tfevents.*")})
    return [EventAccumulator(str(run)).Reload() for run in runs]


def test_tensorboard_writes_events_under_output_dir_runs_with_the_hparams(tmp_path):
    train(tmp_path, "tensorboard")
    [run] = tensorboard_runs(tmp_path / "out")
    assert Path(run.path).parent == tmp_path / "out" / "runs"  # transformers' runs/<date>_<host>
    assert [e.step for e in run.Scalars("train/loss")] == [2, 4, 6]
    assert [e.step for e in run.Scalars("eval/loss")] == [3, 6]
    assert "args" in "".join(run.Tags()["tensors"])
    session = run.summary_metadata[
        "_hparams_/session_start_info"
    ]  # the HParams plugin's session, in this run
    assert session.plugin_data.plugin_name == "hparams" and b"learning_rate" in session.plugin_data.content


def test_tensorboard_logging_dir_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(tmp_path / "tb"))
    train(tmp_path, ["tensorboard"])
    [run] = tensorboard_runs(tmp_path / "tb")
    assert Path(run.path) == tmp_path / "tb"


@pytest.fixture
def mlflow_uri(tmp_path, monkeypatch) -> str:
    return fresh_mlflow_store(tmp_path, monkeypatch)


def test_mlflow_run_at_the_tracking_uri_with_params_and_metrics_per_step(tmp_path, monkeypatch, mlflow_uri):
    import mlflow

    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "ported")
    train(tmp_path, "mlflow")
    uri = mlflow_uri
    client = mlflow.MlflowClient(uri)
    [run] = client.search_runs([client.get_experiment_by_name("ported").experiment_id])
    assert run.info.run_name == "reported" and run.info.status == "FINISHED"
    assert run.data.params["learning_rate"] == "0.01" and run.data.params["max_steps"] == "6"
    assert [m.step for m in client.get_metric_history(run.info.run_id, "loss")] == [2, 4, 6]
    assert [m.step for m in client.get_metric_history(run.info.run_id, "eval_loss")] == [3, 6]


def test_mlflow_run_id_continues_that_run(tmp_path, monkeypatch, mlflow_uri):
    import mlflow

    client = mlflow.MlflowClient(mlflow_uri)
    earlier = client.create_run(client.create_experiment("resumed")).info.run_id
    monkeypatch.setenv("MLFLOW_RUN_ID", earlier)
    train(tmp_path, "mlflow")
    assert len(client.search_runs([client.get_experiment_by_name("resumed").experiment_id])) == 1
    assert [m.step for m in client.get_metric_history(earlier, "loss")] == [2, 4, 6]


def test_wandb_offline_run_with_the_arguments_and_the_curves(tmp_path, monkeypatch):
    import wandb

    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_PROJECT", "ported")
    wandb.teardown()  # wandb reads WANDB_DIR when it sets up, once a process: an earlier test's setup would win
    try:
        train(tmp_path, "wandb")
    finally:
        wandb.finish()  # as a script's exit does, and its service's end, which writes the run file out
        wandb.teardown()
    [run] = offline_runs(tmp_path)
    assert (run.project, run.name) == ("ported", "reported")
    assert run.config["learning_rate"] == 0.01 and run.config["model/num_parameters"] > 0
    losses = [(row["train/global_step"], row["train/loss"]) for row in run.history if "train/loss" in row]
    assert [step for step, _ in losses] == [2, 4, 6]
    assert "train_runtime" in run.summary and "eval/loss" in run.summary


def test_all_is_every_installed_integration_and_none_is_no_callback(tmp_path):
    everything = quiet_args(tmp_path, report_to="all")
    assert everything.report_to == available_integrations() == ["mlflow", "tensorboard", "wandb"]
    assert quiet_args(tmp_path, report_to="none").report_to == []
    assert quiet_args(tmp_path, report_to=None).report_to == []
    trainer = Trainer(model=make_model(), args=quiet_args(tmp_path, report_to="none"))
    assert not [
        c
        for c in trainer.callback_handler.callbacks
        if isinstance(c, tuple(INTEGRATION_TO_CALLBACK.values()))
    ]


def test_all_gives_the_trainer_one_callback_per_installed_integration(tmp_path):
    trainer = Trainer(model=make_model(), args=quiet_args(tmp_path, report_to="all"))
    kinds = [type(c) for c in trainer.callback_handler.callbacks]
    assert {MLflowCallback, TensorBoardCallback, WandbCallback} <= set(kinds)


@pytest.mark.parametrize("name", ["no-such-integration", "comet_ml", "trackio"])
def test_a_name_that_is_not_an_integration_is_refused_with_the_list(tmp_path, name):
    with pytest.raises(
        ValueError, match=rf"report_to' names '{name}'.*choose from 'mlflow', 'tensorboard', 'wandb'"
    ):
        quiet_args(tmp_path, report_to=["tensorboard", name])


@pytest.mark.parametrize("name", sorted(INTEGRATIONS))
def test_a_named_integration_whose_package_is_missing_is_refused_before_training(tmp_path, monkeypatch, name):
    module = INTEGRATIONS[name][0]
    monkeypatch.setitem(sys.modules, module, None)  # what an environment without the package shows importlib
    args = quiet_args(tmp_path, report_to=name)  # the arguments may be written where the package is absent
    assert name not in available_integrations()
    with pytest.raises(TrainerConfigError, match=rf"{module} package is not installed: pip install"):
        Trainer(model=make_model(), args=args, train_dataset=Regression(8))
