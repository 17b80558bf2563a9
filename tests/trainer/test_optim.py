"""Optimizers and learning-rate schedules named in the arguments."""

from __future__ import annotations

import math

import pytest
import torch
from trainer_tasks import Regression, make_model, quiet_args

from trainer import Trainer, TrainerConfigError
from trainer.optim import create_optimizer, create_scheduler, parameter_groups


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("adamw_torch", torch.optim.AdamW),
        ("adamw_torch_fused", torch.optim.AdamW),
        ("sgd", torch.optim.SGD),
        ("adafactor", torch.optim.Adafactor),
        ("adagrad", torch.optim.Adagrad),
    ],
)
def test_every_optimizer_trains(tmp_path, name, kind):
    lr = 0.5 if name == "adagrad" else 1e-2
    args = quiet_args(
        tmp_path,
        optim=name,
        max_steps=12,
        learning_rate=lr,
        logging_steps=12,
        weight_decay=0.01,
        per_device_train_batch_size=16,
        lr_scheduler_type="constant",
    )
    trainer = Trainer(model=make_model(), args=args, train_dataset=Regression(64))
    before = trainer.evaluate(Regression(64))["eval_loss"]
    trainer.train()
    assert isinstance(trainer.optimizer, kind)
    assert trainer.evaluate(Regression(64))["eval_loss"] < before
    if name == "adamw_torch_fused":
        assert trainer.optimizer.defaults["fused"] is True


def test_weight_decay_skips_biases(tmp_path):
    groups = parameter_groups(make_model(), weight_decay=0.1)
    assert [g["weight_decay"] for g in groups] == [0.1, 0.0]
    assert all(p.ndim == 2 for p in groups[0]["params"]) and all(p.ndim == 1 for p in groups[1]["params"])


def test_optim_args_are_passed_and_bad_ones_named(tmp_path):
    args = quiet_args(tmp_path, optim="sgd", optim_args={"momentum": 0.9})
    assert create_optimizer(args, make_model()).defaults["momentum"] == 0.9
    with pytest.raises(TrainerConfigError, match="cannot build optimizer 'sgd'"):
        create_optimizer(quiet_args(tmp_path, optim="sgd", optim_args={"momentum_typo": 1}), make_model())


def multipliers(tmp_path, kind: str, total: int = 10, warmup: int = 2, **kwargs) -> list[float]:
    args = quiet_args(
        tmp_path, lr_scheduler_type=kind, warmup_steps=warmup, learning_rate=1.0, lr_scheduler_kwargs=kwargs
    )
    optimizer = torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=1.0)
    scheduler = create_scheduler(args, optimizer, total)
    values = []
    for _ in range(total + 1):
        values.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return values


def test_schedules_follow_their_formulas(tmp_path):
    assert multipliers(tmp_path, "constant") == [1.0] * 11
    assert multipliers(tmp_path, "constant_with_warmup")[:4] == [0.0, 0.5, 1.0, 1.0]
    linear = multipliers(tmp_path, "linear")
    assert linear[:3] == [0.0, 0.5, 1.0] and linear[6] == pytest.approx(0.5) and linear[10] == 0.0
    cosine = multipliers(tmp_path, "cosine")
    assert cosine[2] == 1.0 and cosine[6] == pytest.approx(0.5) and cosine[10] == pytest.approx(0.0)
    restarts = multipliers(tmp_path, "cosine_with_restarts", num_cycles=2)
    assert restarts[6] == pytest.approx(1.0) and restarts[4] == pytest.approx(0.5)
    poly = multipliers(tmp_path, "polynomial", power=2.0, lr_end=0.0)
    assert poly[6] == pytest.approx(0.25)
    inverse = multipliers(tmp_path, "inverse_sqrt")
    assert inverse[2] == 1.0 and inverse[8] == pytest.approx(1 / math.sqrt(4))


def test_warmup_ratio_and_unknown_schedule_kwargs(tmp_path):
    args = quiet_args(tmp_path, warmup_ratio=0.25)
    assert args.get_warmup_steps(20) == 5
    with pytest.raises(TrainerConfigError, match="do not fit lr_scheduler_type 'linear'"):
        multipliers(tmp_path, "linear", num_cycles=3)


def test_reduce_on_plateau_lowers_the_rate_after_evaluations_without_progress(tmp_path):
    args = quiet_args(
        tmp_path,
        lr_scheduler_type="reduce_on_plateau",
        eval_strategy="steps",
        eval_steps=1,
        max_steps=6,
        learning_rate=1e-2,
        lr_scheduler_kwargs={"patience": 0, "factor": 0.5},
    )
    trainer = Trainer(model=make_model(), args=args, train_dataset=Regression(32), eval_dataset=Regression(8))
    # an eval loss that never improves after the first evaluation
    trainer.compute_metrics = None
    original = trainer.evaluate
    trainer.evaluate = lambda *a, **k: {**original(*a, **k), "eval_loss": 1.0}
    trainer.train()
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(1e-2 * 0.5**5)


def test_optimizers_passed_in_are_used_as_they_are(tmp_path):
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.1)
    trainer = Trainer(
        model=model,
        args=quiet_args(tmp_path, max_steps=4),
        train_dataset=Regression(32),
        optimizers=(optimizer, scheduler),
    )
    trainer.train()
    assert trainer.optimizer is optimizer and trainer.lr_scheduler is scheduler
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.05 * 0.01)
    with pytest.raises(TrainerConfigError, match="optimizers cannot be passed with model_init"):
        Trainer(model_init=make_model, args=quiet_args(tmp_path), optimizers=(optimizer, None))
