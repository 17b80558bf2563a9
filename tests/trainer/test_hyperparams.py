"""Hyperparameters changed between two steps (PBT's exploit and explore): a member that copies another's checkpoint and
trains on with new values is bitwise equal to the source trained straight through with the values changed at that step."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from trainer_tasks import DropoutMLP, Regression

from trainer import Trainer, TrainingArguments
from trainer.checkpoint import checkpoint_dir, copy_checkpoint
from trainer.hyperparams import HyperparameterSchedule, apply_hyperparameters
from trainer.optim import create_optimizer, create_scheduler

STEPS, AT = 12, 4
NEW = {"learning_rate": 0.02, "weight_decay": 0.2, "adam_beta1": 0.8, "adam_epsilon": 1e-6, "dropout": 0.5}


def set_dropout(model: torch.nn.Module, value: float) -> None:
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = value


def args(folder: Path, learning_rate: float = 0.05, **extra) -> TrainingArguments:
    return TrainingArguments(
        output_dir=str(folder),
        max_steps=STEPS,
        per_device_train_batch_size=8,
        learning_rate=learning_rate,
        weight_decay=0.01,
        lr_scheduler_type="linear",
        warmup_steps=2,
        save_strategy="steps",
        save_steps=AT,
        logging_steps=1,
        seed=3,
        disable_tqdm=True,
        report_to=[],
        **extra,
    )


def train(folder: Path, changes=None, resume=None, learning_rate: float = 0.05) -> Trainer:
    callbacks = [HyperparameterSchedule(changes, {"dropout": set_dropout})] if changes else []
    trainer = Trainer(
        model_init=lambda: DropoutMLP(dropout=0.1),
        args=args(folder, learning_rate),
        train_dataset=Regression(64),
        callbacks=callbacks,
    )
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def state_of(trainer: Trainer) -> dict[str, torch.Tensor]:
    tensors = {f"model.{k}": v.detach().clone() for k, v in trainer.model.state_dict().items()}
    for index, state in trainer.optimizer.state_dict()["state"].items():
        tensors.update({f"optimizer.{index}.{k}": torch.as_tensor(v).clone() for k, v in state.items()})
    return tensors


def assert_bitwise_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name].cpu(), b[name].cpu()), f"{name} differs"  # Adam keeps `step` on the CPU


def learning_rates(trainer: Trainer) -> dict[int, float]:
    return {e["step"]: e["learning_rate"] for e in trainer.state.log_history if "learning_rate" in e}


@pytest.mark.parametrize("new", [NEW, {"learning_rate": 0.02}], ids=["all", "learning-rate"])
def test_exploit_then_k_steps_equals_the_source_with_the_change_at_that_step(tmp_path, new):
    straight = train(tmp_path / "straight", changes={AT: new})
    source = train(tmp_path / "source")  # the source member, unchanged, saving checkpoint-4 on its way
    # The member had its own learning rate; it copies the source's checkpoint and continues with the new values.
    copy_checkpoint(checkpoint_dir(tmp_path / "source", AT), tmp_path / "member")
    member = train(tmp_path / "member", changes={AT: new}, resume=True, learning_rate=0.001)
    assert_bitwise_equal(state_of(member), state_of(straight))
    assert any(
        not torch.equal(a, b)
        for a, b in zip(state_of(member).values(), state_of(source).values(), strict=True)
    )
    rates = learning_rates(member)
    # linear decay from the new peak, at the point of the schedule where the source stood: 0.02 * (12 - 5) / 10
    assert rates[AT + 1] == pytest.approx(0.02 * (STEPS - AT - 1) / (STEPS - 2))
    assert learning_rates(straight) == {**learning_rates(source) | {s: r for s, r in rates.items() if s > AT}}


def test_weight_decay_changes_only_the_decayed_group_and_betas_keep_their_other_value(tmp_path):
    model = DropoutMLP()
    optimizer = create_optimizer(args(tmp_path), model)
    scheduler = create_scheduler(args(tmp_path), optimizer, STEPS)
    apply_hyperparameters(
        optimizer, scheduler, {"weight_decay": 0.3, "adam_beta2": 0.9, "learning_rate": 0.1}
    )
    decay, no_decay = optimizer.param_groups
    assert decay["weight_decay"] == 0.3 and no_decay["weight_decay"] == 0.0
    assert decay["betas"] == (0.9, 0.9) and no_decay["betas"] == (0.9, 0.9)
    assert scheduler.base_lrs == [0.1, 0.1] and decay["initial_lr"] == 0.1
    assert decay["lr"] == 0.0  # step 0 of a 2-step warm-up: the multiplier is 0 whatever the peak
    with pytest.raises(ValueError, match="cannot change per_device_train_batch_size mid-run"):
        apply_hyperparameters(optimizer, scheduler, {"per_device_train_batch_size": 4})


def test_a_schedule_naming_an_unchangeable_value_is_refused_when_built():
    with pytest.raises(ValueError, match="step 4: cannot change dropout mid-run; changeable: learning_rate"):
        HyperparameterSchedule({4: {"dropout": 0.3}})


@pytest.mark.parametrize(
    ("kind", "kwargs", "reference"),
    [
        ("polynomial", {"lr_end": 0.1, "power": 2.0}, "get_polynomial_decay_schedule_with_warmup"),
        ("cosine_with_min_lr", {"min_lr": 0.1}, "get_cosine_with_min_lr_schedule_with_warmup"),
    ],
)
def test_a_changed_learning_rate_keeps_the_schedules_absolute_end_rate(tmp_path, kind, kwargs, reference):
    """After the change the rates are those of a run started at the new rate (what a resumed PBT member builds from
    its arguments), so the schedule still ends at lr_end / min_lr, not at new_lr x lr_end / old_lr."""
    optimization = pytest.importorskip("transformers.optimization")
    total, new_lr = 10, 2.0
    fields = dict(lr_scheduler_type=kind, lr_scheduler_kwargs=kwargs, warmup_steps=2, learning_rate=1.0)
    optimizer = torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=1.0)
    scheduler = create_scheduler(TrainingArguments(str(tmp_path), **fields), optimizer, total)
    fresh = torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=new_lr)
    theirs = getattr(optimization, reference)(fresh, num_warmup_steps=2, num_training_steps=total, **kwargs)
    ours_rates, their_rates = [], []
    for step in range(total + 1):
        if step == AT:
            apply_hyperparameters(optimizer, scheduler, {"learning_rate": new_lr})
        if step >= AT:
            ours_rates.append(optimizer.param_groups[0]["lr"])
            their_rates.append(fresh.param_groups[0]["lr"])
        for opt, sched in ((optimizer, scheduler), (fresh, theirs)):
            opt.step()
            sched.step()
    assert ours_rates == pytest.approx(their_rates, rel=1e-9)
    assert ours_rates[-1] == pytest.approx(0.1)  # the configured end rate, not 0.2
