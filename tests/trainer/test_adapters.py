"""A peft adapter over the real pretrained MiniLM trains through the Trainer: only the adapter is optimized, checkpoints
hold only the adapter (peft's layout) and resume bitwise, the best adapter comes back at the end, and save_model writes
what `PeftModel.from_pretrained` loads."""

from __future__ import annotations

import json
from pathlib import Path

import distilbert_task
import pytest
import torch
from lora_minilm import (
    FULL_MODEL_BYTES,
    base_model,
    collator,
    data,
    lora_model,
    p_tuning_model,
    peft_model,
    trainable_state,
)
from peft import (
    AdaLoraConfig,
    IA3Config,
    PeftModel,
    PrefixTuningConfig,
    PromptEncoderConfig,
    PromptTuningConfig,
    get_peft_model,
)
from peft.utils import load_peft_weights
from trainer_tasks import quiet_args

from trainer import Trainer
from trainer.errors import TrainerConfigError


def lora_trainer(tmp_path: Path, model: torch.nn.Module | None = None, **fields) -> Trainer:
    train, evaluation = data()
    args = quiet_args(
        tmp_path, **{"per_device_train_batch_size": 8, "learning_rate": 1e-3, "seed": 0, **fields}
    )
    return Trainer(
        model=model if model is not None else lora_model(),
        args=args,
        train_dataset=train,
        eval_dataset=evaluation,
        data_collator=collator,
    )


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_only_the_adapter_is_optimized_and_checkpointed(tmp_path):
    trainer = lora_trainer(tmp_path, max_steps=2, save_strategy="steps", save_steps=2)
    trainer.train()
    optimized = sum(p.numel() for group in trainer.optimizer.param_groups for p in group["params"])
    trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in trainer.model.parameters())
    assert (
        optimized == trainable < total / 50
    )  # LoRA r=8 + the head: well under 2% of MiniLM's 22M parameters

    checkpoint = tmp_path / "checkpoint-2"
    files = {p.name for p in checkpoint.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "optimizer.pt", "trainer_state.json"} <= files
    assert "model.safetensors" not in files and "trainable_extra.safetensors" not in files
    size = folder_bytes(checkpoint)
    assert size < 2_000_000, f"checkpoint is {size} bytes: not adapter-sized"
    assert size < FULL_MODEL_BYTES / 40
    assert json.loads((checkpoint / "adapter_config.json").read_text())["peft_type"] == "LORA"


@pytest.mark.parametrize("build", [lora_model, p_tuning_model], ids=["lora", "p_tuning"])
def test_resume_from_an_adapter_checkpoint_is_bitwise(tmp_path, build):
    fields = {"max_steps": 6, "save_strategy": "steps", "save_steps": 3, "logging_steps": 1}
    straight = lora_trainer(tmp_path / "a", model=build(), **fields)
    straight.train()
    first = lora_trainer(tmp_path / "b", model=build(), **fields)
    first.train()
    # A new process would start from a fresh model: build one with a different seed (its new head differs) and resume.
    resumed = lora_trainer(tmp_path / "b", model=build(seed=1), **fields)
    resumed.train(resume_from_checkpoint=tmp_path / "b" / "checkpoint-3")

    losses = [entry["loss"] for entry in straight.state.log_history if "loss" in entry]
    resumed_losses = [entry["loss"] for entry in resumed.state.log_history if "loss" in entry]
    assert resumed_losses == losses
    expected, got = trainable_state(straight.model), trainable_state(resumed.model)
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.equal(expected[name], got[name]), name


def test_load_best_model_at_end_restores_the_best_adapter(tmp_path):
    # At this learning rate the few-step run overshoots: the eval loss is lowest after step 1, not at the end.
    trainer = lora_trainer(
        tmp_path,
        max_steps=4,
        learning_rate=5e-3,
        eval_strategy="steps",
        eval_steps=1,
        save_strategy="steps",
        save_steps=1,
        load_best_model_at_end=True,
        metric_for_best_model="loss",
    )
    trainer.train()
    best = Path(trainer.state.best_model_checkpoint)
    assert trainer.state.best_global_step < 4
    saved = load_peft_weights(str(best))
    assert trainer.evaluate()["eval_loss"] == pytest.approx(trainer.state.best_metric, abs=1e-6)
    final = load_peft_weights(str(tmp_path / "checkpoint-4"))
    assert any(not torch.equal(saved[name], final[name]) for name in saved)


def test_save_model_writes_an_adapter_that_from_pretrained_loads(tmp_path):
    trainer = lora_trainer(tmp_path / "run", max_steps=3)
    trainer.train()
    out = trainer.save_model(tmp_path / "adapter")
    files = {p.name for p in out.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors"} <= files and "model.safetensors" not in files
    assert (out / "adapter_model.safetensors").stat().st_size < 1_000_000

    reloaded = PeftModel.from_pretrained(base_model(seed=5), str(out)).eval()
    batch = collator(data()[1][:8])
    trainer.model.eval()
    with torch.no_grad():
        expected = trainer.model(**batch).logits
        got = reloaded(**batch).logits
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)


def test_fsdp_with_an_adapter_is_refused_before_training(tmp_path):
    trainer = lora_trainer(tmp_path, max_steps=2, strategy="fsdp", use_cpu=True)
    with pytest.raises(TrainerConfigError, match="'single' or 'ddp'"):
        trainer.train()
    assert trainer.state.global_step == 0
    trainer.strategy.teardown()


def test_adalora_moves_its_rank_budget_during_training(tmp_path):
    config = AdaLoraConfig(
        task_type="SEQ_CLS",
        target_modules=["query", "value"],
        init_r=6,
        target_r=2,
        total_step=6,
        tinit=1,
        tfinal=2,
        deltaT=1,
    )
    trainer = lora_trainer(tmp_path, model=peft_model(config), max_steps=6)
    trainer.train()
    # peft records where the budget went once allocation is final: fewer ranks than the initial 6 per layer remain
    pattern = trainer.model.peft_config["default"].rank_pattern
    assert pattern, "update_and_allocate never ran"
    kept = sum(sum(mask) for mask in pattern.values())
    assert 0 < kept < 6 * len(pattern)
    out = trainer.save_model(tmp_path / "adapter")
    assert json.loads((out / "adapter_config.json").read_text())["rank_pattern"]


OTHER_METHODS = {
    "ia3": IA3Config(
        task_type="SEQ_CLS",
        target_modules=["key", "value", "output.dense"],
        feedforward_modules=["output.dense"],
    ),
    "prefix_tuning": PrefixTuningConfig(task_type="SEQ_CLS", num_virtual_tokens=4),
    "prompt_tuning": PromptTuningConfig(task_type="SEQ_CLS", num_virtual_tokens=4),
    "p_tuning": PromptEncoderConfig(task_type="SEQ_CLS", num_virtual_tokens=4, encoder_hidden_size=32),
}


@pytest.mark.parametrize("method", sorted(OTHER_METHODS))
def test_every_method_trains_into_an_adapter_sized_checkpoint_that_reloads(tmp_path, method):
    trainer = lora_trainer(
        tmp_path / "run",
        model=peft_model(OTHER_METHODS[method]),
        max_steps=2,
        save_strategy="steps",
        save_steps=2,
    )
    trainer.train()
    assert folder_bytes(tmp_path / "run" / "checkpoint-2") < 2_000_000
    out = trainer.save_model(tmp_path / "adapter")
    reloaded = PeftModel.from_pretrained(base_model(seed=5), str(out)).eval()
    batch = collator(data()[1][:8])
    trainer.model.eval()
    with torch.no_grad():
        torch.testing.assert_close(reloaded(**batch).logits, trainer.model(**batch).logits, rtol=0, atol=1e-5)


def test_prefix_tuning_a_model_without_past_key_values_is_refused_before_any_step(tmp_path):
    model = get_peft_model(
        distilbert_task.model_init(),
        PrefixTuningConfig(
            task_type="SEQ_CLS", num_virtual_tokens=4, token_dim=32, num_attention_heads=2, num_layers=1
        ),
    )
    trainer = lora_trainer(tmp_path, model=model, max_steps=2, save_strategy="steps", save_steps=1)
    with pytest.raises(
        TrainerConfigError, match="prefix_tuning cannot train DistilBertForSequenceClassification"
    ) as error:
        trainer.train()
    assert "use prompt_tuning, p_tuning or lora instead" in str(error.value)
    assert trainer.state.global_step == 0 and not list(tmp_path.glob("checkpoint-*"))
