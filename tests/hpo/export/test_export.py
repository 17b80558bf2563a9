"""`hpo export` and `hpo.load_exported`: the best trial's checkpoint ships, reloads, and reproduces its metric."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import optuna
import pytest
import torch
import yaml
from safetensors.torch import load_file
from study_task import write_study

import hpo
from hpo.cli import main
from hpo.errors import HpoError
from hpo.export.write import export_run, export_study
from hpo.spec import load_run_spec, load_study_spec
from hpo.study.manager import run_study
from hpo.tracking.store import open_store
from hpo.trial.single_run import run_training


def run_in_process(path, n_trials: int) -> None:
    """The study, one trial after another in this process (the scheduler's subprocess path has its own slow test)."""
    run_study(str(path), n_trials=n_trials, in_process=True)


@pytest.fixture(scope="module")
def finished_study(tmp_path_factory):
    """Three trials of the tiny task, tracked in the experiment store."""
    folder = tmp_path_factory.mktemp("study")
    path = write_study(
        folder,
        study={"n_trials": 3, "pruner": {"type": "none"}, "keep_checkpoints": {"top_k": 3}},
        tracking={"store": True},
    )
    run_in_process(path, n_trials=3)
    return path


def test_export_of_the_best_trial_reloads_and_reproduces_its_metric(finished_study, tmp_path):
    spec = load_study_spec(finished_study)
    best = optuna.load_study(study_name="test", storage=spec.storage).best_trial

    result = export_study(spec, tmp_path / "export")

    assert result.source.trial_number == best.number
    assert result.recorded["eval_accuracy"] == pytest.approx(best.value)
    assert result.reloaded["eval_accuracy"] == pytest.approx(best.value, abs=1e-6)
    assert result.reloaded["eval_loss"] == pytest.approx(result.recorded["eval_loss"], rel=1e-5)
    out = tmp_path / "export"
    assert sorted(p.name for p in out.iterdir()) == [
        "README.md",
        "export.json",
        "hyperparameters.json",
        "metrics.json",
        "model.safetensors",
        "training_args.json",
    ]
    assert json.loads((out / "hyperparameters.json").read_text())["params"] == best.params
    assert json.loads((out / "training_args.json").read_text())["learning_rate"] == pytest.approx(
        best.params["learning_rate"]
    )
    card = (out / "README.md").read_text()
    assert f"trial {best.number}" in card and "3 trials (3 complete)" in card and "eval_accuracy" in card
    assert "pruner: none" in card and "eval_runtime" not in card
    (artifact,) = open_store(spec.store_url).artifacts(f"test/trial-{best.number}", kind="export")
    assert artifact["size"] == (out / "model.safetensors").stat().st_size


def test_load_exported_round_trip(finished_study, tmp_path):
    spec = load_study_spec(finished_study)
    result = export_study(spec, tmp_path / "export", evaluate=False)

    model = hpo.load_exported(tmp_path / "export")

    assert isinstance(model, torch.nn.Module) and not model.training
    weights = load_file(str(result.source.checkpoint / "model.safetensors"))
    assert all(torch.equal(model.state_dict()[k], v) for k, v in weights.items())
    x = torch.randn(4, 8)
    assert model(x)["logits"].shape == (4, 3)


def test_export_command_prints_recorded_beside_reloaded(finished_study, tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["export", str(finished_study), "--out", str(tmp_path / "e"), "--trial", "1"])
    assert stopped.value.code == 0
    output = capsys.readouterr().out
    assert "exported trial 1 of study test" in output
    assert "recorded" in output and "reloaded" in output and "eval_accuracy" in output
    assert json.loads((tmp_path / "e" / "export.json").read_text())["trial_number"] == 1


def test_export_refuses_a_folder_that_is_not_an_export(finished_study, tmp_path, capsys):
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(SystemExit) as stopped:
        main(["export", str(finished_study), "--out", str(tmp_path)])
    assert stopped.value.code == 2
    assert "--out" in capsys.readouterr().err and (tmp_path / "precious.txt").read_text() == "keep me"


def test_export_of_a_trial_without_checkpoint_names_the_cause(finished_study, tmp_path):
    spec = load_study_spec(finished_study)
    study = optuna.load_study(study_name="test", storage=spec.storage)
    worst = min(study.trials, key=lambda t: t.value)
    shutil.rmtree(spec.trial_dir(worst.number), ignore_errors=True)
    with pytest.raises(HpoError, match=f"trial {worst.number} .* has no checkpoint"):
        export_study(spec, tmp_path / "e", trial_number=worst.number)


def test_multi_objective_export_picks_from_the_pareto_front_by_metric(tmp_path, capsys):
    path = write_study(
        tmp_path,
        study={
            "metric": None,
            "direction": None,
            "metrics": ["accuracy", "loss"],
            "directions": ["maximize", "minimize"],
            "n_trials": 2,
            "pruner": {"type": "none"},
        },
    )
    run_in_process(path, n_trials=2)
    spec = load_study_spec(path)

    with pytest.raises(SystemExit) as stopped:
        main(["export", str(path), "--out", str(tmp_path / "e")])
    assert stopped.value.code == 2 and "--metric" in capsys.readouterr().err

    result = export_study(spec, tmp_path / "e", metric="loss", evaluate=False)
    front = optuna.load_study(study_name="test", storage=spec.storage).best_trials
    assert result.source.trial_number == min(front, key=lambda t: t.values[1]).number


def test_export_of_a_single_train_run(tmp_path):
    study_file = write_study(tmp_path)
    run_file = tmp_path / "run.yaml"
    data = yaml.safe_load(study_file.read_text())
    run = {
        "name": "one",
        "output_dir": str(tmp_path / "run"),
        "task": data["task"],
        "model": {"hidden": 8},
        "training": {**data["training"], "metric_for_best_model": "accuracy"},
    }
    run_file.write_text(yaml.safe_dump(run))
    run_training(load_run_spec(run_file))

    result = export_run(load_run_spec(run_file), tmp_path / "export")

    assert result.source.kind == "run" and result.source.model_params == {"hidden": 8}
    assert result.reloaded["eval_accuracy"] == pytest.approx(result.recorded["eval_accuracy"], abs=1e-6)
    assert hpo.load_exported(tmp_path / "export").net[0].out_features == 8


def test_export_of_a_transformers_model_loads_with_from_pretrained(tmp_path, monkeypatch):
    # deepspeed, imported by transformers' integrations on first use, sets this variable; setenv makes monkeypatch
    # remove it again when the test ends (a plain delenv of an absent variable would record nothing to undo).
    monkeypatch.setenv("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    from transformers import AutoTokenizer, BertForSequenceClassification

    shutil.copy(Path(__file__).with_name("export_task.py"), tmp_path / "export_task.py")
    path = write_study(
        tmp_path,
        task={
            "model_init": "export_task:model_init",
            "data": "export_task:data",
            "collator": "export_task:collator",
            "compute_metrics": "export_task:compute_metrics",
            "tokenizer": "export_task:tokenizer",
        },
        study={"n_trials": 1, "pruner": {"type": "none"}},
        training={
            "max_steps": 4,
            "eval_steps": 2,
            "save_steps": 2,
            "logging_steps": 2,
            "per_device_train_batch_size": 16,
        },
        search_space={"learning_rate": {"type": "float", "low": 1.0e-4, "high": 1.0e-3, "log": True}},
    )
    run_in_process(path, n_trials=1)

    result = export_study(load_study_spec(path), tmp_path / "export")

    model = BertForSequenceClassification.from_pretrained(tmp_path / "export")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "export")
    assert model.config.hidden_size == 16 and tokenizer("good film")["input_ids"][0] == tokenizer.cls_token_id
    assert result.reloaded["eval_loss"] == pytest.approx(result.recorded["eval_loss"], rel=1e-5)
    assert type(hpo.load_exported(tmp_path / "export")) is BertForSequenceClassification


def test_retrain_trains_the_best_params_from_scratch_as_a_tracked_run(finished_study, tmp_path, capsys):
    spec = load_study_spec(finished_study)
    best = optuna.load_study(study_name="test", storage=spec.storage).best_trial

    with pytest.raises(SystemExit) as stopped:
        main(
            [
                "retrain",
                str(finished_study),
                "--out",
                str(tmp_path / "long"),
                "--set",
                "training.max_steps=16",
            ]
        )

    assert stopped.value.code == 0
    assert f"retraining trial {best.number} of study test" in capsys.readouterr().out
    summary = json.loads((tmp_path / "long" / "metrics.json").read_text())
    assert summary["global_step"] == 16
    (run,) = open_store(spec.store_url).runs(kind="run")
    assert run["status"] == "completed" and run["name"] == f"test-retrain-trial-{best.number}"
    assert run["arguments"]["learning_rate"] == pytest.approx(best.params["learning_rate"])
    assert run["arguments"]["max_steps"] == 16


def test_study_flags_on_a_run_file_exit_2_naming_the_flag(tmp_path, capsys):
    data = yaml.safe_load(write_study(tmp_path).read_text())
    run_file = tmp_path / "run.yaml"
    run_file.write_text(yaml.safe_dump({"name": "one", "task": data["task"], "training": data["training"]}))
    with pytest.raises(SystemExit) as stopped:
        main(["export", str(run_file), "--out", str(tmp_path / "e"), "--trial", "3"])
    assert stopped.value.code == 2 and "--trial" in capsys.readouterr().err


def test_the_weights_are_as_readable_as_the_files_beside_them(finished_study, tmp_path):
    """safetensors 0.8 writes its files 0600 (safetensors#782): another account (a serving user) could not load an
    exported model whose JSON files it could read. Export and checkpoint both give the weights the umask's mode."""
    mode = lambda path: path.stat().st_mode & 0o777  # noqa: E731
    spec = load_study_spec(finished_study)
    export_study(spec, tmp_path / "export")
    out = tmp_path / "export"
    assert mode(out / "model.safetensors") == mode(out / "export.json")
    checkpoints = sorted((Path(spec.output_dir)).glob("trial-*/checkpoint-*"))
    assert checkpoints
    for checkpoint in checkpoints:
        assert mode(checkpoint / "model.safetensors") == mode(checkpoint / "trainer_state.json"), checkpoint
