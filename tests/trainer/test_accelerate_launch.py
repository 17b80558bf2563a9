"""`accelerate launch` settings reach the arguments as transformers' Trainer gets them, or are refused in one line
where they contradict what the script set."""

from __future__ import annotations

import pytest
from trainer_tasks import Regression, make_model, quiet_args

from trainer import Trainer, TrainerConfigError, TrainingArguments


def build(tmp_path, **fields) -> TrainingArguments:
    return TrainingArguments(output_dir=str(tmp_path), **fields)


def test_mixed_precision_from_the_launcher_trains_in_bf16(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    monkeypatch.setenv("ACCELERATE_USE_CPU", "True")
    args = quiet_args(tmp_path, max_steps=1)
    assert args.bf16 and args.use_cpu
    seen = {}

    def capture(model, inputs, return_outputs=False, num_items_in_batch=None):
        seen["dtype"] = model(**inputs)["logits"].dtype
        return Trainer.compute_loss(trainer, model, inputs, return_outputs, num_items_in_batch)

    trainer = Trainer(model=make_model(), args=args, train_dataset=Regression(16))
    trainer.compute_loss = capture
    trainer.train()
    assert str(seen["dtype"]) == "torch.bfloat16"  # the forward ran under bf16 autocast


def test_no_mixed_precision_leaves_the_arguments_deciding(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "no")
    assert build(tmp_path, fp16=False).bf16 is False


def test_a_launcher_setting_that_contradicts_the_arguments_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    with pytest.raises(
        TrainerConfigError, match="ACCELERATE_MIXED_PRECISION=bf16 but the training argument 'fp16'"
    ):
        build(tmp_path, fp16=True, use_cpu=True)
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "fp8")
    with pytest.raises(TrainerConfigError, match="fp8"):
        build(tmp_path)
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "no")
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    with pytest.raises(
        TrainerConfigError, match="ACCELERATE_USE_FSDP=true but the training argument 'strategy'"
    ):
        build(tmp_path, strategy="ddp")


def test_fsdp_options_become_the_fsdp_config(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.setenv("FSDP_VERSION", "1")
    monkeypatch.setenv("FSDP_SHARDING_STRATEGY", "SHARD_GRAD_OP")
    monkeypatch.setenv("FSDP_AUTO_WRAP_POLICY", "TRANSFORMER_BASED_WRAP")
    monkeypatch.setenv("FSDP_TRANSFORMER_CLS_TO_WRAP", "BertLayer,BertEmbeddings")
    monkeypatch.setenv("FSDP_OFFLOAD_PARAMS", "false")
    monkeypatch.setenv("FSDP_STATE_DICT_TYPE", "SHARDED_STATE_DICT")
    args = build(tmp_path, fsdp_config={"cpu_offload": True})
    assert args.strategy == "fsdp"
    assert args.fsdp_config == {
        "transformer_layer_cls_to_wrap": ["BertLayer", "BertEmbeddings"],
        "cpu_offload": True,  # the script's own fsdp_config wins over the launcher's default
        "reshard_after_forward": False,
        "state_dict_type": "SHARDED_STATE_DICT",
    }


def test_deepspeed_from_the_launcher(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "cpu")
    args = build(tmp_path)
    assert args.strategy == "deepspeed"
    assert args.deepspeed == {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}}
    config = tmp_path / "ds.json"
    config.write_text('{"zero_optimization": {"stage": 1}}')
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_CONFIG_FILE", str(config))
    assert build(tmp_path).deepspeed == str(config)


def test_dynamo_backend_turns_compile_on(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELERATE_DYNAMO_BACKEND", "INDUCTOR")
    monkeypatch.setenv("ACCELERATE_DYNAMO_MODE", "reduce-overhead")
    args = build(tmp_path)
    assert (args.torch_compile, args.torch_compile_backend, args.torch_compile_mode) == (
        True,
        "inductor",
        "reduce-overhead",
    )
    monkeypatch.setenv("ACCELERATE_DYNAMO_BACKEND", "NO")
    assert build(tmp_path).torch_compile is False
