"""`hpo train`: end to end in a subprocess (exit code, metrics.json, accuracy), --set, --resume, and bad run files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hpo.cli import main

ROOT = Path(__file__).resolve().parents[3]
RUN_FILE = ROOT / "studies" / "digits_mlp_run.yaml"
TASK = {
    "model_init": "studies.tasks.digits:model_init",
    "data": "studies.tasks.digits:data",
    "compute_metrics": "studies.tasks.digits:compute_metrics",
}
# A short, plain run: 2 epochs of 45 steps, a checkpoint and an evaluation at each epoch.
SHORT = [
    "--set",
    "training.num_train_epochs=2",
    "--set",
    "training.load_best_model_at_end=false",
    "--set",
    "training.save_total_limit=null",
]


def hpo(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "offline"}
    return subprocess.run(
        [sys.executable, "-m", "hpo.cli", *args],
        cwd=cwd or ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def metrics(output_dir: Path) -> dict:
    return json.loads((output_dir / "metrics.json").read_text())


def test_example_run_file_starts_with_its_command():
    assert RUN_FILE.read_text().splitlines()[0] == "# hpo train studies/digits_mlp_run.yaml"


def test_train_end_to_end_reaches_95_percent(tmp_path):
    result = hpo("train", str(RUN_FILE), "--output-dir", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    summary = metrics(tmp_path / "out")
    assert summary["final"]["eval_accuracy"] >= 0.95
    assert summary["best"]["metric"] == "eval_accuracy" and summary["best"]["value"] >= 0.95
    assert Path(summary["best"]["checkpoint"]).is_dir()
    assert (Path(summary["best"]["checkpoint"]) / "model.safetensors").is_file()
    assert summary["global_step"] == 25 * 45 and summary["wall_time_s"] < 60
    assert "best checkpoint" in result.stdout and "eval_accuracy" in result.stdout


def test_set_overrides_change_the_run(tmp_path):
    out = tmp_path / "out"
    result = hpo(
        "train",
        str(RUN_FILE),
        "--output-dir",
        str(out),
        *SHORT,
        "--set",
        "training.num_train_epochs=1",
        "--set",
        "model.hidden_size=8",
        "--set",
        "training.per_device_train_batch_size=64",
    )
    assert result.returncode == 0, result.stderr
    summary = metrics(out)
    assert summary["global_step"] == 23  # ceil(1437 / 64)
    arguments = json.loads((out / "checkpoint-23" / "training_args.json").read_text())
    assert arguments["per_device_train_batch_size"] == 64 and arguments["output_dir"] == str(out)


@pytest.mark.slow  # 11 s on 2 cores: run by .ci/run's slow suite
def test_resume_latest_and_from_a_path_match_an_uninterrupted_run(tmp_path):
    full = tmp_path / "full"
    assert hpo("train", str(RUN_FILE), "--output-dir", str(full), *SHORT).returncode == 0
    expected = metrics(full)["final"]

    interrupted = tmp_path / "interrupted"
    shutil.copytree(full, interrupted)
    shutil.rmtree(interrupted / "checkpoint-90")  # as if the process died before its last save
    (interrupted / "metrics.json").unlink()
    result = hpo("train", str(RUN_FILE), "--output-dir", str(interrupted), *SHORT, "--resume")
    assert result.returncode == 0, result.stderr
    resumed = metrics(interrupted)
    assert resumed["resumed_from"] == str(interrupted / "checkpoint-45") and resumed["global_step"] == 90
    assert resumed["final"]["eval_loss"] == pytest.approx(expected["eval_loss"], abs=1e-6)
    assert resumed["final"]["eval_accuracy"] == expected["eval_accuracy"]

    elsewhere = tmp_path / "elsewhere"
    result = hpo(
        "train",
        str(RUN_FILE),
        "--output-dir",
        str(elsewhere),
        *SHORT,
        "--resume",
        str(full / "checkpoint-45"),
    )
    assert result.returncode == 0, result.stderr
    assert metrics(elsewhere)["final"]["eval_loss"] == pytest.approx(expected["eval_loss"], abs=1e-6)


def test_resume_without_a_checkpoint_exits_2(tmp_path, capsys):
    code = run_main("train", str(RUN_FILE), "--output-dir", str(tmp_path / "empty"), "--resume")
    assert code == 2
    assert "--resume: no complete checkpoint in" in capsys.readouterr().err


def write_run(tmp_path: Path, **sections) -> Path:
    data = {"task": TASK, "training": {"num_train_epochs": 1}, **sections}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run_main(*args: str) -> int:
    with pytest.raises(SystemExit) as stop:
        main(list(args))
    return stop.value.code


@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        (
            {"training": {"lerning_rate": 0.1}},
            "training.lerning_rate: unknown field (did you mean learning_rate?)",
        ),
        (
            {"task": {**TASK, "model_init": "studies.tasks.nope:model_init"}},
            "task.model_init: module 'studies.tasks.nope' not found",
        ),
    ],
)
def test_bad_run_file_in_a_subprocess_exits_2_without_traceback(tmp_path, sections, expected):
    result = hpo("train", str(write_run(tmp_path, **sections)))
    assert result.returncode == 2
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        ({"modle": {}}, "modle: unknown field (did you mean model?)"),
        (
            {"training": {"num_train_epochs": "ten"}},
            "training.num_train_epochs: must be a number (got 'ten')",
        ),
        (
            {"training": {"per_device_train_batch_size": 0}},
            "training.per_device_train_batch_size: must be > 0",
        ),
        ({"training": {"warmup_ratio": 1.5}}, "training.warmup_ratio: must be in [0, 1]"),
        (
            {"task": {**TASK, "data": "studies.tasks.digits:dat"}},
            "task.data: module 'studies.tasks.digits' has no attribute 'dat' (did you mean data?)",
        ),
        ({"task": {**TASK, "data": "studies.tasks.digits.data"}}, "task.data: expected 'module:function'"),
        ({"tracking": {"wandb": {"mode": "sometimes"}}}, "tracking.wandb.mode: 'sometimes' is not allowed"),
    ],
)
def test_bad_run_file_exits_2_naming_the_field(tmp_path, capsys, sections, expected):
    assert run_main("train", str(write_run(tmp_path, **sections))) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_bad_override_exits_2(tmp_path, capsys):
    assert run_main("train", str(RUN_FILE), "--set", "training.learning_rate") == 2
    assert "expected key=value" in capsys.readouterr().err
    assert run_main("train", str(RUN_FILE), "--set", "training.lerning_rate=1") == 2
    assert "training.lerning_rate: unknown field" in capsys.readouterr().err


def test_missing_run_file_exits_2(tmp_path, capsys):
    assert run_main("train", str(tmp_path / "nope.yaml")) == 2
    assert "nope.yaml: no such run file" in capsys.readouterr().err


def test_debug_shows_the_traceback(tmp_path, capsys):
    assert run_main("--debug", "train", str(write_run(tmp_path, modle={}))) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "modle: unknown field" in err


NAN_TASK = """
import torch
from torch import nn
from torch.utils.data import TensorDataset


class Diverges(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Linear(2, 1)

    def forward(self, x, y):
        return {"loss": self.w(x).sum() * float("nan")}


def model_init(params):
    return Diverges()


def data(params):
    return TensorDataset(torch.ones(64, 2), torch.ones(64)), None
"""


def test_non_finite_loss_exits_1_with_a_clear_message(tmp_path):
    (tmp_path / "nan_task.py").write_text(NAN_TASK)
    path = tmp_path / "nan.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "task": {"model_init": "nan_task:model_init", "data": "nan_task:data"},
                "output_dir": str(tmp_path / "out"),
                "training": {"max_steps": 20, "max_non_finite_steps": 3, "save_strategy": "no"},
                "tracking": {"store": False},
            }
        )
    )
    result = hpo("train", str(path), cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "training diverged" in result.stderr and "learning_rate" in result.stderr
    assert "Traceback" not in result.stderr
