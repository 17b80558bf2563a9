"""`hpo status` and `hpo best` on a finished study; `hpo run` end to end through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from study_task import write_study

from hpo.cli import main


def _cli(args: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


@pytest.fixture
def finished_study(tmp_path: Path, capsys, monkeypatch) -> Path:
    monkeypatch.setenv("COLUMNS", "220")
    path = write_study(
        tmp_path,
        study={
            "n_trials": 3,
            "pruner": {"type": "median", "n_startup_trials": 1},
            "enqueue": [
                {"learning_rate": 0.05, "explode": False},
                {"learning_rate": 1e-5, "explode": False},
                {"learning_rate": 0.05, "explode": True},
            ],
        },
        search_space={
            "learning_rate": {"type": "float", "low": 1e-6, "high": 0.1, "log": True},
            "explode": {"type": "categorical", "choices": [False, True]},
        },
    )
    code, out, err = _cli(["run", str(path), "--in-process"], capsys)
    assert code == 0, err
    assert "trial   1 PRUNED   at step 4" in out
    assert "error: RuntimeError: model_init exploded on purpose" in out
    assert "best trial: #0 eval_accuracy = " in out
    return path


def test_status_shows_every_trial(finished_study: Path, capsys) -> None:
    code, out, err = _cli(["status", str(finished_study)], capsys)
    assert code == 0, err
    header = next(line for line in out.splitlines() if "pruned at" in line)
    columns = [cell.strip() for cell in header.split("┃")[1:-1]]
    assert {"pruned at", "peak gpu", "peak rss", "trained params", "checkpoint"} <= set(columns)
    cells = {
        line.split("│")[1].strip(): dict(
            zip(columns, (c.strip() for c in line.split("│")[1:-1]), strict=True)
        )
        for line in out.splitlines()
        if line.count("│") == len(columns) + 1
    }
    assert cells["0 *"]["state"] == "COMPLETE" and "learning_rate=0.05" in cells["0 *"]["params"]
    assert cells["1"]["state"] == "PRUNED" and cells["1"]["pruned at"] == "4"
    assert cells["2"]["state"] == "FAIL" and "explode=True" in cells["2"]["params"]
    # Peak memory of the trials that trained (a GPU figure only where a GPU trained them); the failed one never
    # started training.
    gpu = cells["1"]["peak gpu"]
    assert gpu.endswith("MiB") if torch.cuda.is_available() else gpu == "-"
    assert cells["1"]["peak rss"].endswith(("MiB", "GiB"))  # a CUDA context alone is about 1 GiB
    assert cells["2"]["peak rss"] == "-"
    # What each trial trained and what its checkpoint costs on disk; the failed trial has neither.
    assert cells["0 *"]["trained params"] != "-" and cells["0 *"]["checkpoint"].endswith(("KiB", "MiB"))
    assert cells["2"]["trained params"] == "-" and cells["2"]["checkpoint"] == "-"
    assert "1 complete, 1 pruned, 1 fail" in out


def test_best_shows_parameters_and_checkpoint(finished_study: Path, capsys) -> None:
    code, out, err = _cli(["best", str(finished_study)], capsys)
    assert code == 0, err
    checkpoint = finished_study.parent / "out" / "trial-0"
    assert "trial 0: eval_accuracy = 0.8" in out
    assert "learning_rate=0.05" in out
    assert f"checkpoint: {checkpoint}/checkpoint-" in out
    code, out, _ = _cli(["best", str(finished_study), "--json"], capsys)
    (best,) = json.loads(out)
    assert best["number"] == 0 and Path(best["best_checkpoint"], "model.safetensors").is_file()


def test_status_of_a_study_that_does_not_exist(tmp_path: Path, capsys) -> None:
    path = write_study(tmp_path, study={"n_trials": 1})
    code, _, err = _cli(["status", str(path)], capsys)
    assert code == 1
    assert "no study database" in err and "hpo run" in err
    other = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    code, _, err = _cli(["best", str(path), "--storage", other], capsys)
    assert code == 1 and "elsewhere.db" in err
