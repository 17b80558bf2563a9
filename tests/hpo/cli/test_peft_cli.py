"""The `peft:` section through `hpo validate` and `hpo run`, with real peft over the real pretrained MiniLM: a LoRA
study validates and runs adapter-sized trials; bad sections exit 2 naming the field and what would be valid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hpo.cli import main
from hpo.tracking.store import open_store

TASK = {
    "model_init": "studies.tasks.minilm:model_init",
    "data": "studies.tasks.minilm:data",
    "collator": "studies.tasks.minilm:collator",
    "compute_metrics": "studies.tasks.minilm:compute_metrics",
}
STUDY = {
    "study": {"name": "lora", "metric": "accuracy", "n_trials": 1, "pruner": {"type": "none"}},
    "task": TASK,
    "model": {"train_size": 16, "eval_size": 16, "max_length": 16},
    "peft": {"method": "lora", "lora_alpha": 16, "target_modules": ["query", "value"]},
    "training": {
        "max_steps": 2,
        "per_device_train_batch_size": 8,
        "eval_strategy": "steps",
        "eval_steps": 2,
        "save_strategy": "steps",
        "save_steps": 2,
        "disable_tqdm": True,
    },
    "search_space": {
        "r": {"type": "categorical", "choices": [4, 8]},
        "lora_dropout": {"type": "float", "low": 0.0, "high": 0.1},
        "target_modules": {"type": "categorical", "choices": ["query,value", "query,key,value,dense"]},
        "learning_rate": {"type": "float", "low": 1e-4, "high": 1e-3, "log": True},
    },
}


def run_main(*args: str) -> int:
    with pytest.raises(SystemExit) as stop:
        main(list(args))
    return stop.value.code


def write(tmp_path: Path, data: dict, drop: tuple[str, ...] = (), **changes: dict) -> Path:
    data = json.loads(json.dumps(data))  # a deep copy
    for name in drop:
        del data["search_space"][name]
    for key, value in changes.items():
        data[key] = {**data[key], **value}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_lora_study_validates_with_adapter_options_searched(tmp_path, capsys):
    assert run_main("validate", str(write(tmp_path, STUDY))) == 0
    out = capsys.readouterr().out
    assert (
        "valid study file 'lora'" in out
        and "adapter: peft lora; searched: lora_dropout, r, target_modules" in out
    )


def test_an_unknown_option_names_the_field_and_lists_the_valid_ones(tmp_path, capsys):
    assert run_main("validate", str(write(tmp_path, STUDY, peft={"lora_alhpa": 8})), "--no-dry-run") == 2
    err = capsys.readouterr().err
    assert "peft.lora_alhpa: is not an option of peft's LoraConfig; did you mean lora_alpha?" in err
    assert "valid options: " in err and "lora_alpha" in err and "target_modules" in err


def test_an_unknown_method_lists_the_methods(tmp_path, capsys):
    assert run_main("validate", str(write(tmp_path, STUDY, peft={"method": "lorra"})), "--no-dry-run") == 2
    err = capsys.readouterr().err
    assert (
        "peft.method: 'lorra' is not a peft method" in err
        and "prefix_tuning" in err
        and "did you mean lora?" in err
    )


def test_a_value_peft_refuses_names_its_field(tmp_path, capsys):
    bad = {"target_modules": "all-linear", "layers_to_transform": [0]}
    assert run_main("validate", str(write(tmp_path, STUDY, peft=bad)), "--no-dry-run") == 2
    assert "peft.layers_to_transform: peft refused the value" in capsys.readouterr().err


def test_a_searched_option_that_is_not_the_methods_is_named(tmp_path, capsys):
    space = {"num_virtual_tokens": {"type": "int", "low": 4, "high": 8, "target": "peft"}}
    assert run_main("validate", str(write(tmp_path, STUDY, search_space=space)), "--no-dry-run") == 2
    assert "search_space.num_virtual_tokens: is not an option of peft's LoraConfig" in capsys.readouterr().err


def test_target_modules_that_match_nothing_list_the_models_linear_layers(tmp_path, capsys):
    path = write(tmp_path, STUDY, drop=("target_modules",), peft={"target_modules": ["q_proj", "v_proj"]})
    assert run_main("validate", str(path)) == 2
    err = capsys.readouterr().err
    assert "peft.target_modules: q_proj, v_proj match no layer of BertForSequenceClassification" in err
    assert "its linear layers are classifier, dense, key, query, value" in err


def test_every_searched_target_modules_choice_is_checked(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(
        tmp_path
    )  # the study's relative output folder (its workers' logs) lands here, not in the checkout
    space = {"target_modules": {"type": "categorical", "choices": ["query,value", "attn_out"]}}
    path = write(tmp_path, STUDY, search_space=space)
    assert run_main("run", str(path), "--storage", f"sqlite:///{tmp_path / 's.db'}") == 2
    assert "peft.target_modules: attn_out match no layer" in capsys.readouterr().err


def test_fsdp_with_an_adapter_is_refused_with_what_works(tmp_path, capsys):
    path = write(tmp_path, STUDY, training={"strategy": "fsdp"})
    assert run_main("validate", str(path), "--no-dry-run") == 2
    assert (
        "training.strategy: fsdp does not train adapters (peft:) yet; adapters train on one device or with ddp"
        in (capsys.readouterr().err)
    )


def test_deepspeed_with_an_adapter_is_refused(tmp_path, capsys):
    path = write(tmp_path, STUDY, training={"deepspeed": {"zero_optimization": {"stage": 3}}})
    assert run_main("validate", str(path), "--no-dry-run") == 2
    assert "training.deepspeed: deepspeed does not train adapters (peft:) yet" in capsys.readouterr().err


@pytest.mark.slow  # 15-21 s: the default suite stays near 10 minutes on 2 cores
def test_a_lora_study_runs_adapter_sized_trials(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, STUDY)
    assert run_main("run", str(path)) == 0
    trial = tmp_path / "runs" / "lora" / "trial-0"
    checkpoint = trial / "checkpoint-2"
    assert (checkpoint / "adapter_model.safetensors").is_file() and not (
        checkpoint / "model.safetensors"
    ).exists()
    config = json.loads((checkpoint / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["task_type"] == "SEQ_CLS"
    assert config["r"] in (4, 8) and set(config["target_modules"]) in (
        {"query", "value"},
        {"query", "key", "value", "dense"},
    )
    # LoRA on every linear layer of MiniLM at r=8 (with its Adam state) is ~4 MB; the full model's checkpoint ~270 MB
    size = sum(p.stat().st_size for p in checkpoint.iterdir())
    assert size < 6_000_000

    # The store and `hpo status` show what the trial trained and what its checkpoint costs.
    (run,) = open_store(str(tmp_path / "runs" / "lora" / "experiments.db")).runs(study_name="lora")
    assert run["checkpoint_bytes"] == size
    assert 10_000 < run["trainable_params"] < 1_000_000  # the adapter and the head, not MiniLM's 22M
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "200")  # a wide console: every column on one line
    assert run_main("status", str(path)) == 0
    out = capsys.readouterr().out
    assert "trained params" in out and "checkpoint" in out
    shown = f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 2**10:.1f} KiB"
    assert f"{run['trainable_params'] / 1000:.1f}k" in out and shown in out


def test_hpo_train_with_an_adapter_then_export_reloads_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = {
        "name": "lora_run",
        "task": TASK,
        "model": STUDY["model"],
        "peft": {"method": "lora", "r": 4, "target_modules": "query,value"},
        "training": {**STUDY["training"], "metric_for_best_model": "accuracy"},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(run))
    assert run_main("train", str(path)) == 0
    assert (tmp_path / "runs" / "lora_run" / "checkpoint-2" / "adapter_model.safetensors").is_file()
    assert run_main("export", str(path), "--out", str(tmp_path / "export")) == 0
    out = capsys.readouterr().out
    assert "eval_accuracy" in out
    manifest = json.loads((tmp_path / "export" / "export.json").read_text())
    assert manifest["adapter"]["adapters"]["default"]["method"] == "lora"


PREFIX_ON_DISTILBERT = {
    "task": {**TASK, "model_init": "distilbert_task:model_init"},
    # DistilBERT's config names its sizes otherwise (dim, n_heads, n_layers): peft asks for them
    "peft": {
        "method": "prefix_tuning",
        "num_virtual_tokens": 4,
        "token_dim": 32,
        "num_attention_heads": 2,
        "num_layers": 1,
    },
    "search_space": {"learning_rate": {"type": "float", "low": 1e-4, "high": 1e-3, "log": True}},
}


@pytest.mark.parametrize("command", ["validate", "run"])
def test_prefix_tuning_on_a_model_without_past_key_values_is_refused_in_the_dry_run(
    tmp_path, capsys, monkeypatch, command
):
    monkeypatch.chdir(tmp_path)
    study = {**STUDY, **PREFIX_ON_DISTILBERT}
    assert run_main(command, str(write(tmp_path, study))) == 2
    err = capsys.readouterr().err
    assert (
        "peft.method: prefix_tuning cannot train DistilBertForSequenceClassification under transformers"
        in err
    )
    assert "use prompt_tuning, p_tuning or lora instead" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not list(tmp_path.glob("runs/lora/trial-*"))  # no trial started


def test_prefix_tuning_on_the_pretrained_minilm_passes_the_dry_run(tmp_path, capsys):
    prefix = {"method": "prefix_tuning", "num_virtual_tokens": 4}
    study = {**STUDY, "peft": prefix, "search_space": PREFIX_ON_DISTILBERT["search_space"]}
    assert run_main("validate", str(write(tmp_path, study))) == 0
    assert "adapter: peft prefix_tuning" in capsys.readouterr().out
