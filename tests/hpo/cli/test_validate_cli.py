"""`hpo validate`: run and study files, the dry evaluation that proves the objective metric exists, and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hpo.cli import main
from hpo.spec import load_study_spec
from hpo.trial.dry_run import dry_run, representative_params

ROOT = Path(__file__).resolve().parents[3]
TASK = {
    "model_init": "studies.tasks.digits:model_init",
    "data": "studies.tasks.digits:data",
    "compute_metrics": "studies.tasks.digits:compute_metrics",
}
STUDY = {
    "study": {"name": "v", "metric": "accuracy", "n_trials": 2},
    "task": TASK,
    "training": {"eval_strategy": "epoch", "num_train_epochs": 1},
    "search_space": {
        "learning_rate": {"type": "float", "low": 1e-3, "high": 1e-1, "log": True},
        "activation": {"type": "categorical", "choices": ["relu", "gelu"]},
        "dropout": {"type": "float", "low": 0.1, "high": 0.5, "when": {"activation": "gelu"}},
        "hidden_size": {"type": "int", "low": 8, "high": 32, "when": {"activation": "relu"}},
    },
}


def run_main(*args: str) -> int:
    with pytest.raises(SystemExit) as stop:
        main(list(args))
    return stop.value.code


def write(tmp_path: Path, data: dict, name: str = "study.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_validate_a_study_reports_what_it_would_do(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_main("validate", str(write(tmp_path, STUDY))) == 0
    out = capsys.readouterr().out
    assert "valid study file 'v'" in out
    assert "maximize eval_accuracy" in out and "pruner: asha stop-type rungs" in out
    assert (
        "scheduler: asha, mode stop: rungs from each trial's first evaluation, each 2 times as far" in out
    )  # no pruner named: the default
    assert (
        "a trial outside the best share (a third where the rung's values rank those 4 times further on, all where "
        "they do not) at a rung stops once 2 trials have completed" in out
    )
    assert f"sqlite:///{tmp_path}/runs/v/study.db" in out
    assert "evaluation produces: eval_accuracy, eval_loss" in out


def test_validate_a_run_file(capsys):
    assert run_main("validate", str(ROOT / "studies" / "digits_mlp_run.yaml")) == 0
    out = capsys.readouterr().out
    assert "valid run file 'digits_mlp'" in out and "eval_accuracy" in out


def test_metric_that_evaluation_does_not_produce_is_refused(tmp_path, capsys):
    path = write(tmp_path, STUDY)
    assert run_main("validate", str(path), "--set", "study.metric=f1") == 2
    err = capsys.readouterr().err
    assert "study.metric: evaluation does not produce eval_f1" in err and "eval_accuracy" in err
    # --no-dry-run skips the evaluation, so only the schema is checked
    assert run_main("validate", str(path), "--set", "study.metric=f1", "--no-dry-run") == 0


def test_study_without_compute_metrics_cannot_optimise_accuracy(tmp_path, capsys):
    data = {**STUDY, "task": {k: v for k, v in TASK.items() if k != "compute_metrics"}}
    assert run_main("validate", str(write(tmp_path, data))) == 2
    assert "evaluation does not produce eval_accuracy" in capsys.readouterr().err


def test_metric_for_best_model_of_a_run_file_is_checked(tmp_path, capsys):
    run = {"task": TASK, "training": {"eval_strategy": "epoch", "metric_for_best_model": "f1"}}
    assert run_main("validate", str(write(tmp_path, run, "run.yaml"))) == 2
    assert "training.metric_for_best_model: evaluation does not produce eval_f1" in capsys.readouterr().err


def test_storage_option(tmp_path, capsys):
    path = write(tmp_path, STUDY)
    url = f"sqlite:///{tmp_path}/elsewhere.db"
    assert run_main("validate", str(path), "--storage", url, "--no-dry-run") == 0
    assert url in capsys.readouterr().out
    assert run_main("validate", str(path), "--storage", "nonsense") == 2
    assert "study.storage: 'nonsense' is not a database URL" in capsys.readouterr().err
    assert run_main("validate", str(ROOT / "studies" / "digits_mlp_run.yaml"), "--storage", url) == 2
    assert "--storage applies to study files" in capsys.readouterr().err


def test_refused_study_exits_2_naming_the_field(tmp_path, capsys):
    data = {
        **STUDY,
        "study": {
            **STUDY["study"],
            "metrics": ["accuracy", "loss"],
            "metric": None,
            "pruner": {"type": "median"},
        },
    }
    assert run_main("validate", str(write(tmp_path, data))) == 2
    assert "study.pruner: Optuna cannot prune a study with several objectives" in capsys.readouterr().err


def test_model_init_refusing_the_parameters_is_reported(tmp_path, capsys):
    data = {**STUDY, "model": {"hidden_sise": 3}}
    assert run_main("validate", str(write(tmp_path, data))) == 2
    assert "unknown parameter(s) ['hidden_sise']" in capsys.readouterr().err


def test_representative_params_honour_conditions(tmp_path):
    spec = load_study_spec(write(tmp_path, STUDY))
    assert representative_params(spec) == {"learning_rate": 1e-3, "activation": "relu", "hidden_size": 8}
    assert set(dry_run(spec)) >= {"eval_accuracy", "eval_loss"}
