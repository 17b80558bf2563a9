"""Fast, single-process checks of the distributed building blocks: samplers, DeepSpeed config filling, launcher
detection. The multi-process behaviour is tested by the `distributed`-marked files beside this one."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import BatchSampler, TensorDataset

from trainer.deepspeed_config import DeepSpeedConfigError, fill_deepspeed_config
from trainer.distributed import DistributedEvalSampler, DistributedTrainSampler, drop_eval_padding
from trainer.fsdp_options import validate_fsdp_config
from trainer.launch import _check_layout, detect_launcher, is_launched_externally


def _dataset(n: int) -> TensorDataset:
    return TensorDataset(torch.arange(n).float())


def test_two_ranks_at_batch_b_see_what_one_process_sees_at_batch_2b():
    dataset, b = _dataset(40), 4
    ranks = [DistributedTrainSampler(dataset, 2, r, shuffle=True, seed=7, drop_last=False) for r in range(2)]
    single = DistributedTrainSampler(dataset, 1, 0, shuffle=True, seed=7, drop_last=False)
    for epoch in (0, 1):
        for sampler in [*ranks, single]:
            sampler.set_epoch(epoch)
        rank_batches = [list(BatchSampler(s, b, drop_last=False)) for s in ranks]
        single_batches = list(BatchSampler(single, 2 * b, drop_last=False))
        for step, batch in enumerate(single_batches):
            assert sorted(batch) == sorted(rank_batches[0][step] + rank_batches[1][step])
    assert list(ranks[0]) != list(DistributedTrainSampler(dataset, 2, 0, True, 7, False)), (
        "epoch must reshuffle"
    )


def test_train_sampler_order_is_the_single_process_trainer_order():
    from trainer.data import EpochShuffleSampler

    dataset = _dataset(25)
    ours, theirs = (
        DistributedTrainSampler(dataset, 1, 0, True, 3, False),
        EpochShuffleSampler(dataset, seed=3),
    )
    for epoch in (0, 4):
        ours.set_epoch(epoch)
        theirs.set_epoch(epoch)
        assert list(ours) == list(theirs)


def test_train_sampler_pads_or_drops_an_uneven_tail():
    dataset = _dataset(5)
    padded = [list(DistributedTrainSampler(dataset, 2, r, False, 0, drop_last=False)) for r in range(2)]
    assert padded == [[0, 2, 4], [1, 3, 0]]
    dropped = [list(DistributedTrainSampler(dataset, 2, r, False, 0, drop_last=True)) for r in range(2)]
    assert dropped == [[0, 2], [1, 3]]


@pytest.mark.parametrize("size,batch", [(10, 4), (7, 2), (9, 3), (1, 4), (8, 4)])
def test_eval_batches_gathered_in_rank_order_rebuild_the_single_process_order(size, batch):
    dataset = _dataset(size)
    per_rank = [
        list(BatchSampler(DistributedEvalSampler(dataset, 2, r, batch), batch, False)) for r in range(2)
    ]
    assert len(per_rank[0]) == len(per_rank[1]), "every rank must run the same number of eval batches"
    gathered = [i for step in range(len(per_rank[0])) for rank in range(2) for i in per_rank[rank][step]]
    assert drop_eval_padding(torch.tensor(gathered), size).tolist() == list(range(size))
    single = list(BatchSampler(range(size), batch, False))
    assert [b for step in zip(*per_rank, strict=True) for b in step][: len(single)] == single


def _args(**overrides):
    values = dict(
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        max_grad_norm=1.0,
        learning_rate=3e-4,
        adam_beta1=0.9,
        adam_beta2=0.98,
        adam_epsilon=1e-8,
        weight_decay=0.01,
        bf16=True,
        fp16=False,
        max_steps=100,
        warmup_steps=0,
        warmup_ratio=0.1,
    )
    values.update(overrides)
    return SimpleNamespace(**values)


def test_deepspeed_auto_values_come_from_the_arguments(tmp_path):
    source = {
        "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "bf16": {"enabled": "auto"},
        "optimizer": {
            "type": "AdamW",
            "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"},
        },
        "scheduler": {
            "type": "WarmupDecayLR",
            "params": {
                "warmup_min_lr": "auto",
                "warmup_max_lr": "auto",
                "warmup_num_steps": "auto",
                "total_num_steps": "auto",
            },
        },
        "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto"},
    }
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(source))
    config = fill_deepspeed_config(str(path), _args(), world_size=2)
    assert config["train_micro_batch_size_per_gpu"] == 4
    assert config["gradient_accumulation_steps"] == 2
    assert config["train_batch_size"] == 16
    assert config["gradient_clipping"] == 1.0
    assert config["bf16"] == {"enabled": True}
    assert config["optimizer"]["params"] == {
        "lr": 3e-4,
        "betas": [0.9, 0.98],
        "eps": 1e-8,
        "weight_decay": 0.01,
    }
    assert config["scheduler"]["params"] == {
        "warmup_min_lr": 0.0,
        "warmup_max_lr": 3e-4,
        "warmup_num_steps": 10,
        "total_num_steps": 100,
    }
    assert "reduce_bucket_size" not in config["zero_optimization"]
    assert json.loads(path.read_text()) == source, "the user's file is not modified"


def test_deepspeed_explicit_value_that_contradicts_the_arguments_is_refused():
    with pytest.raises(
        DeepSpeedConfigError, match="train_micro_batch_size_per_gpu=8 contradicts per_device_train"
    ):
        fill_deepspeed_config({"train_micro_batch_size_per_gpu": 8}, _args(), world_size=2)
    with pytest.raises(DeepSpeedConfigError, match="bf16.enabled"):
        fill_deepspeed_config({"bf16": {"enabled": False}}, _args(bf16=True), world_size=1)


def test_deepspeed_config_errors_name_the_problem(tmp_path):
    with pytest.raises(DeepSpeedConfigError, match="does not exist"):
        fill_deepspeed_config(str(tmp_path / "missing.json"), _args(), 1)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(DeepSpeedConfigError, match="not valid JSON"):
        fill_deepspeed_config(str(tmp_path / "bad.json"), _args(), 1)
    with pytest.raises(DeepSpeedConfigError, match="zero_optimization.stage"):
        fill_deepspeed_config({"zero_optimization": {"stage": 4}}, _args(), 1)
    with pytest.raises(DeepSpeedConfigError, match="flops_profiler.enabled"):
        fill_deepspeed_config({"flops_profiler": {"enabled": "auto"}}, _args(), 1)
    with pytest.raises(DeepSpeedConfigError, match="total_num_steps"):
        source = {"scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": "auto"}}}
        fill_deepspeed_config(source, _args(max_steps=-1), 1)


def test_fsdp_config_is_checked():
    config = validate_fsdp_config({"transformer_layer_cls_to_wrap": "Block, Linear", "min_num_params": 10})
    assert config["transformer_layer_cls_to_wrap"] == ["Block", "Linear"]
    assert config["state_dict_type"] == "FULL_STATE_DICT"
    with pytest.raises(ValueError, match="unknown key.*'wrap_policy'"):
        validate_fsdp_config({"wrap_policy": "size"})
    with pytest.raises(ValueError, match="state_dict_type"):
        validate_fsdp_config({"state_dict_type": "LOCAL"})


@pytest.mark.parametrize(
    "variables,expected",
    [
        ({}, None),
        ({"RANK": "0", "WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "x"}, "torchrun"),
        ({"RANK": "0", "WORLD_SIZE": "2", "CROSS_RANK": "0"}, "deepspeed"),
        (
            {"RANK": "0", "WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "x", "ACCELERATE_MIXED_PRECISION": "no"},
            "accelerate",
        ),
        ({"OMPI_COMM_WORLD_SIZE": "2"}, "mpi"),
    ],
)
def test_launcher_detection(monkeypatch, variables, expected):
    for name in (
        "RANK",
        "WORLD_SIZE",
        "TORCHELASTIC_RUN_ID",
        "CROSS_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "ACCELERATE_MIXED_PRECISION",
        "ACCELERATE_DYNAMO_BACKEND",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert detect_launcher() == expected
    assert is_launched_externally() == (expected is not None)


def test_launch_layout_errors_name_the_flag():
    with pytest.raises(ValueError, match="--nproc"):
        _check_layout(0, 1, 0)
    with pytest.raises(ValueError, match="--node-rank"):
        _check_layout(2, 2, 2)


def test_fsdp_wraps_by_class_name_or_parameter_count():
    from trainer.strategies.fsdp import FSDPStrategy

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = torch.nn.Linear(10, 10)  # 110 parameters
            self.norm = torch.nn.LayerNorm(10)  # 20 parameters

    model = torch.nn.Sequential(Block(), Block(), torch.nn.Linear(10, 2))

    def wrapped(config: dict) -> list[torch.nn.Module]:
        return FSDPStrategy(SimpleNamespace(fsdp_config=config))._modules_to_wrap(model)

    assert wrapped({"transformer_layer_cls_to_wrap": ["Block"]}) == [model[0], model[1]]
    assert wrapped({"min_num_params": 100}) == [model[0].inner, model[1].inner]
    # Each unit counts only parameters no wrapped child holds: the Blocks have none left once their parts are units.
    parts = [model[0].inner, model[0].norm, model[1].inner, model[1].norm, model[2]]
    assert wrapped({"min_num_params": 20}) == parts
    assert wrapped({}) == [], "without a policy only the root is sharded (as one unit)"


def test_deepspeed_without_zero_leaves_bf16_to_the_trainers_autocast():
    # DeepSpeed's stage-0 bf16 mode would train bf16 weights with no fp32 master copy.
    config = fill_deepspeed_config(
        {"zero_optimization": {"stage": 0}, "bf16": {"enabled": "auto"}}, _args(), 2
    )
    assert "bf16" not in config
    assert fill_deepspeed_config({"zero_optimization": {"stage": 2}}, _args(), 2)["bf16"] == {"enabled": True}
    explicit = {"zero_optimization": {"stage": 0}, "bf16": {"enabled": True}}
    assert fill_deepspeed_config(explicit, _args(), 2)["bf16"] == {"enabled": True}


@pytest.mark.parametrize("precision,dtype", [("bf16", torch.bfloat16), ("fp16", torch.float16)])
def test_deepspeed_half_precision_casts_float_inputs_instead_of_autocasting(precision, dtype):
    # DeepSpeed keeps the module in half precision and turns an outer CUDA autocast off inside its forward: on an
    # H200 float inputs met bf16 weights ("mat1 and mat2 must have the same dtype"). Inputs are cast, as in
    # transformers; integer ids and labels stay as they are.
    from trainer.strategies.deepspeed import DeepSpeedStrategy

    strategy = DeepSpeedStrategy(_args())
    strategy.device = torch.device("cpu")
    strategy.config = {"zero_optimization": {"stage": 3}, precision: {"enabled": True}}
    assert strategy.engine_dtype() == dtype
    assert not isinstance(strategy.autocast(), torch.autocast)
    batch = strategy.move_batch(
        {"x": torch.ones(2, 3), "labels": torch.tensor([0, 1]), "extra": [torch.zeros(1)]}
    )
    assert (batch["x"].dtype, batch["labels"].dtype, batch["extra"][0].dtype) == (dtype, torch.int64, dtype)
    strategy.config = {
        "zero_optimization": {"stage": 0}
    }  # stage 0, bf16 left to the Trainer: autocast as before
    assert strategy.engine_dtype() is None
    assert strategy.move_batch({"x": torch.ones(1)})["x"].dtype == torch.float32


def test_use_cpu_keeps_every_rank_on_the_cpu_also_where_cuda_is_present():
    from trainer.distributed import pick_device

    # rank 1 of a 2-rank CPU job on a 1-GPU machine: without use_cpu it would ask for a second GPU
    assert pick_device(1, use_cpu=True) == torch.device("cpu")
