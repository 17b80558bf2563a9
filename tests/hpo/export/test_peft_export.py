"""`hpo export` of adapter (peft:) trials with real peft over the real pretrained MiniLM: the adapter in peft's layout
that reloads to its recorded metric, `--merge` equal to the adapter within 1e-5, and `--top 2` named adapters over one
base model that `hpo.load_exported(path, adapter=...)` switches between."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
import torch
import yaml
from lora_minilm import base_model, collator, data
from peft import PeftModel

import hpo
from hpo.cli import main
from hpo.spec import load_study_spec
from hpo.study.manager import run_study
from hpo.study.retrain import retrain_spec

STUDY = {
    "study": {
        "name": "lora",
        "metric": "loss",
        "n_trials": 3,
        "pruner": {"type": "none"},
        # Three distinct configurations: a sampled third could repeat one, and two equal trials train to equal
        # adapters (same seed), which the --top test must tell apart.
        "enqueue": [
            {"r": 2, "target_modules": "query,value"},
            {"r": 8, "target_modules": "key,dense"},
            {"r": 8, "target_modules": "query,value"},
        ],
        "keep_checkpoints": {"top_k": 3},
    },
    "task": {
        "model_init": "studies.tasks.minilm:model_init",
        "data": "studies.tasks.minilm:data",
        "collator": "studies.tasks.minilm:collator",
        "compute_metrics": "studies.tasks.minilm:compute_metrics",
        "tokenizer": "studies.tasks.minilm:tokenizer",
    },
    "model": {"train_size": 32, "eval_size": 16, "max_length": 16},
    "peft": {"method": "lora", "lora_alpha": 16},
    "training": {
        "max_steps": 3,
        "learning_rate": 3e-3,
        "per_device_train_batch_size": 8,
        "eval_strategy": "steps",
        "eval_steps": 3,
        "save_strategy": "steps",
        "save_steps": 3,
        "disable_tqdm": True,
    },
    "search_space": {
        "r": {"type": "categorical", "choices": [2, 8]},
        "target_modules": {"type": "categorical", "choices": ["query,value", "key,dense"]},
    },
}


def run_main(*args: str) -> int:
    with pytest.raises(SystemExit) as stop:
        main(list(args))
    return stop.value.code


@pytest.fixture(scope="module")
def study_file(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("lora")
    study = json.loads(json.dumps(STUDY))
    study["study"]["output_dir"] = str(folder / "runs")
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    run_study(str(path), n_trials=3, in_process=True)
    return path


def logits(model: torch.nn.Module) -> torch.Tensor:
    batch = collator(data()[1])
    with torch.no_grad():
        return model.eval()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits


def test_an_adapter_export_is_peft_layout_and_reloads_to_its_metric(study_file, tmp_path, capsys):
    out = tmp_path / "adapter"
    assert run_main("export", str(study_file), "--out", str(out)) == 0
    files = {p.name for p in out.iterdir()}
    assert {
        "adapter_config.json",
        "adapter_model.safetensors",
        "tokenizer.json",
        "export.json",
        "README.md",
    } <= files
    assert "model.safetensors" not in files
    assert (out / "adapter_model.safetensors").stat().st_size < 1_000_000
    manifest = json.loads((out / "export.json").read_text())
    assert manifest["adapter"]["base"]["model_init"] == "studies.tasks.minilm:model_init"
    assert Path(manifest["adapter"]["base"]["name_or_path"]).name == "model"  # the packaged pretrained MiniLM
    table = capsys.readouterr().out
    assert "eval_loss" in table

    spec = load_study_spec(study_file)
    best = optuna.load_study(study_name="lora", storage=spec.storage).best_trial
    recorded = json.loads((out / "metrics.json").read_text())
    assert recorded["eval_loss"] == pytest.approx(best.value)

    model = hpo.load_exported(out)
    assert isinstance(model, PeftModel)
    from_peft = PeftModel.from_pretrained(base_model(seed=9), str(out))
    torch.testing.assert_close(logits(from_peft), logits(model), rtol=0, atol=1e-6)


def test_the_merged_export_equals_the_adapter_model(study_file, tmp_path):
    assert run_main("export", str(study_file), "--out", str(tmp_path / "adapter"), "--no-eval") == 0
    assert run_main("export", str(study_file), "--out", str(tmp_path / "merged"), "--merge") == 0
    merged = hpo.load_exported(tmp_path / "merged")
    assert not isinstance(merged, PeftModel) and type(merged).__name__ == "BertForSequenceClassification"
    assert (tmp_path / "merged" / "model.safetensors").is_file()
    torch.testing.assert_close(
        logits(merged), logits(hpo.load_exported(tmp_path / "adapter")), rtol=0, atol=1e-5
    )


def test_top_k_exports_named_adapters_over_one_base_and_switches(study_file, tmp_path, capsys):
    out = tmp_path / "top"
    assert run_main("export", str(study_file), "--out", str(out), "--top", "2") == 0
    manifest = json.loads((out / "export.json").read_text())
    names = list(manifest["adapter"]["adapters"])
    assert len(names) == 2 and all(name.startswith("trial-") for name in names)
    for name in names:
        assert (out / name / "adapter_model.safetensors").is_file()
    assert not (out / "model.safetensors").exists()
    card = (out / "README.md").read_text()
    assert all(f"`{name}`" in card for name in names) and "eval_loss" in card
    printed = capsys.readouterr().out
    assert all(f"{name}: reloaded" in printed for name in names)

    first, second = names
    alone = {}
    for name in names:
        number = int(name.removeprefix("trial-"))
        single = tmp_path / name
        assert (
            run_main("export", str(study_file), "--out", str(single), "--trial", str(number), "--no-eval")
            == 0
        )
        alone[name] = logits(hpo.load_exported(single))
    model = hpo.load_exported(out, adapter=second)
    assert model.active_adapter == second
    torch.testing.assert_close(logits(model), alone[second], rtol=0, atol=1e-6)
    model.set_adapter(first)
    torch.testing.assert_close(logits(model), alone[first], rtol=0, atol=1e-6)
    assert not torch.allclose(alone[first], alone[second])


def test_retrain_keeps_the_trials_adapter(study_file, tmp_path):
    spec = load_study_spec(study_file)
    best = optuna.load_study(study_name="lora", storage=spec.storage).best_trial
    run_spec, trial = retrain_spec(spec, tmp_path / "retrain")
    assert trial.number == best.number
    assert run_spec.peft == {"method": "lora", "lora_alpha": 16, **best.params}
    assert "r" not in run_spec.model and "target_modules" not in run_spec.model
