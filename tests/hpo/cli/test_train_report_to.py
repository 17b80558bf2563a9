"""`hpo train` takes `training.report_to` through its run file, as a transformers script takes it: TensorBoard events
and an MLflow run written and read back; a name that is not an integration, or one whose package is missing, exits 2
with one line naming the field and the fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from hpo.cli import main

ROOT = Path(__file__).resolve().parents[3]
TASK = {
    "model_init": "studies.tasks.digits:model_init",
    "data": "studies.tasks.digits:data",
    "compute_metrics": "studies.tasks.digits:compute_metrics",
}
TRAINING = {
    "max_steps": 20,
    "logging_steps": 5,
    "eval_strategy": "steps",
    "eval_steps": 10,
    "save_strategy": "no",
}


def run_file(tmp_path: Path, **training) -> Path:
    path = tmp_path / "run.yaml"
    data = {
        "name": "reported",
        "task": TASK,
        "training": {**TRAINING, **training},
        "tracking": {"store": False},
    }
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.slow  # a subprocess that imports torch, tensorboard and mlflow and creates an MLflow store: ~25 s
def test_report_to_tensorboard_and_mlflow_from_a_run_file(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MLFLOW_TRACKING_URI": uri,
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
    path = run_file(tmp_path, report_to=["tensorboard", "mlflow"], run_name="digits")
    command = [sys.executable, "-m", "hpo.cli", "train", str(path), "--output-dir", str(tmp_path / "out")]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr

    [events] = {e.parent for e in (tmp_path / "out" / "runs").rglob("events.out.tfevents.*")}
    run = EventAccumulator(str(events)).Reload()
    assert [e.step for e in run.Scalars("train/loss")] == [5, 10, 15, 20]
    assert [e.step for e in run.Scalars("eval/accuracy")] == [10, 20]
    client = mlflow.MlflowClient(uri)
    [mlflow_run] = client.search_runs([client.get_experiment_by_name("Default").experiment_id])
    assert mlflow_run.info.run_name == "digits" and mlflow_run.info.status == "FINISHED"
    assert [m.step for m in client.get_metric_history(mlflow_run.info.run_id, "eval_accuracy")] == [10, 20]


def train_exit(path: Path) -> int:
    with pytest.raises(SystemExit) as stop:
        main(["train", str(path)])
    return stop.value.code


def test_a_name_that_is_not_an_integration_exits_2_with_the_list(tmp_path, capsys):
    assert train_exit(run_file(tmp_path, report_to="tensorbord")) == 2
    err = capsys.readouterr().err
    assert "training.report_to: names 'tensorbord', which is not an integration; choose from 'mlflow'" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_an_integration_whose_package_is_missing_exits_2_with_the_pip_command(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as importlib sees an environment without mlflow
    assert train_exit(run_file(tmp_path, report_to=["mlflow"])) == 2
    err = capsys.readouterr().err
    assert (
        "training.report_to: names 'mlflow' but the mlflow package is not installed: pip install 'hpo[mlflow]'"
        in err
    )


def test_a_tracker_named_twice_exits_2(tmp_path, capsys):
    path = run_file(tmp_path, report_to=["tensorboard"])
    data = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**data, "tracking": {"store": False, "tensorboard": True}}))
    assert train_exit(path) == 2
    assert "names ['tensorboard'] and tracking: sets them too" in capsys.readouterr().err
