"""`report_to` beside transformers' own: the same model and arguments trained by transformers' Trainer and by ours,
each reporting to TensorBoard and MLflow, read back with TensorBoard's EventAccumulator and MLflow's client; "all" and
a name that is not an integration compared on both packages."""

from __future__ import annotations

import socket
from pathlib import Path

import mlflow
import pytest
from mlflow_store import fresh_mlflow_store
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from trainer_tasks import Regression, make_model

from trainer import Trainer, TrainingArguments

transformers = pytest.importorskip("transformers")
FIELDS = dict(max_steps=6, logging_steps=2, eval_strategy="steps", eval_steps=3, save_strategy="no",
              per_device_train_batch_size=8, learning_rate=1e-2, disable_tqdm=True, use_cpu=True)  # fmt: skip
PACKAGES = {
    "ours": (Trainer, TrainingArguments),
    "transformers": (transformers.Trainer, transformers.TrainingArguments),
}


def train(package: str, folder: Path, report_to: str) -> None:
    trainer_class, args_class = PACKAGES[package]
    args = args_class(output_dir=str(folder), report_to=report_to, run_name=package, **FIELDS)
    trainer_class(
        model=make_model(), args=args, train_dataset=Regression(32), eval_dataset=Regression(16)
    ).train()


def test_tensorboard_writes_the_same_folder_and_curves_as_transformers(tmp_path):
    runs = {}
    for package in PACKAGES:
        train(package, tmp_path / package, "tensorboard")
        [folder] = {e.parent for e in (tmp_path / package).rglob("events.out.tfevents.*")}
        assert folder.parent == tmp_path / package / "runs" and folder.name.endswith(
            f"_{socket.gethostname()}"
        )
        runs[package] = EventAccumulator(str(folder)).Reload()
    theirs, ours = (set(runs[p].Tags()["scalars"]) for p in ("transformers", "ours"))
    assert theirs <= ours, f"curves transformers writes and we do not: {theirs - ours}"
    for tag in ("train/loss", "eval/loss", "train/learning_rate"):
        assert [e.step for e in runs["ours"].Scalars(tag)] == [
            e.step for e in runs["transformers"].Scalars(tag)
        ]


@pytest.mark.slow  # two trainings, each importing its stack, and a new MLflow store: ~12 s
def test_mlflow_run_holds_what_transformers_logs(tmp_path, monkeypatch):
    uri = fresh_mlflow_store(tmp_path, monkeypatch)
    for package in PACKAGES:
        train(package, tmp_path / package, "mlflow")
    client = mlflow.MlflowClient(uri)
    runs = {
        r.info.run_name: r
        for r in client.search_runs([client.get_experiment_by_name("Default").experiment_id])
    }
    ours, theirs = runs["ours"], runs["transformers"]
    assert ours.info.status == theirs.info.status == "FINISHED"
    shared = set(theirs.data.params) & set(ours.data.params)
    assert {"learning_rate", "max_steps", "logging_steps", "seed"} <= shared
    assert all(ours.data.params[k] == theirs.data.params[k] for k in ("learning_rate", "max_steps", "seed"))
    assert set(theirs.data.metrics) - {"total_flos"} <= set(ours.data.metrics)
    for name in ("loss", "eval_loss"):
        steps = [[m.step for m in client.get_metric_history(r.info.run_id, name)] for r in (ours, theirs)]
        assert steps[0] == steps[1]


def test_all_is_the_same_list_as_transformers(tmp_path):
    ours = TrainingArguments(output_dir=str(tmp_path), report_to="all").report_to
    assert ours == transformers.TrainingArguments(output_dir=str(tmp_path), report_to="all").report_to


@pytest.mark.parametrize("package", list(PACKAGES))
def test_a_name_that_is_not_an_integration_is_a_value_error_listing_them(tmp_path, package):
    with pytest.raises(ValueError, match=r"no-such-integration.*tensorboard"):
        train(
            package, tmp_path, "no-such-integration"
        )  # ours: at the arguments; transformers: at the Trainer
