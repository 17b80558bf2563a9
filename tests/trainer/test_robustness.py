"""Non-finite losses, mixed precision, early stopping, automatic batch size, seeding."""

from __future__ import annotations

import math
import os

import pytest
import torch
from trainer_tasks import DropoutMLP, Regression, make_model, quiet_args

from trainer import (
    EarlyStoppingCallback,
    NonFiniteLossError,
    Trainer,
    TrainerCallback,
    TrainerConfigError,
    enable_full_determinism,
    set_seed,
)
from trainer.checkpoint import latest_checkpoint
from trainer.meter import TensorLossMeter


class NaNAt(DropoutMLP):
    """Returns a NaN loss on the steps listed in `bad` (1-based forward count)."""

    def __init__(self, bad: set[int]):
        super().__init__(dropout=0.0)
        self.bad, self.calls = bad, 0

    def forward(self, x, labels=None):
        out = super().forward(x, labels)
        self.calls += 1
        if self.calls in self.bad:
            out["loss"] = out["loss"] * float("nan")
        return out


def test_non_finite_losses_are_left_out_of_the_logged_mean(tmp_path):
    torch.manual_seed(0)
    args = quiet_args(tmp_path, max_steps=4, logging_steps=4, learning_rate=0.0, max_grad_norm=0.0)
    trainer = Trainer(model=NaNAt({2}), args=args, train_dataset=Regression(32))
    trainer.train()
    assert math.isfinite(trainer.state.log_history[0]["loss"])

    torch.manual_seed(0)
    unfiltered = quiet_args(
        tmp_path, max_steps=4, logging_steps=4, learning_rate=0.0, logging_nan_inf_filter=False
    )
    trainer = Trainer(model=NaNAt({2}), args=unfiltered, train_dataset=Regression(32))
    trainer.train()
    assert math.isnan(trainer.state.log_history[0]["loss"])


def test_a_loss_that_stays_non_finite_stops_the_run(tmp_path):
    # On CPU the streak is checked at every step; the device meter checks every max_non_finite_steps steps (below).
    args = quiet_args(tmp_path, max_steps=50, max_non_finite_steps=3, use_cpu=True)
    trainer = Trainer(model=NaNAt(set(range(5, 100))), args=args, train_dataset=Regression(32))
    with pytest.raises(
        NonFiniteLossError, match="NaN or infinite for 3 optimizer steps in a row .last at step 7."
    ):
        trainer.train()


def test_the_device_meter_raises_within_the_limit_window():
    meter = TensorLossMeter(filter_non_finite=True, max_non_finite_steps=3, device=torch.device("cpu"))
    meter.add(torch.tensor(1.0), 1)
    meter.add(torch.tensor(float("nan")), 2)
    meter.add(torch.tensor(3.0), 3)  # the streak is broken
    for step in (4, 5):
        meter.add(torch.tensor(float("inf")), step)
    with pytest.raises(NonFiniteLossError):
        meter.add(torch.tensor(float("nan")), 6)
    assert meter.pop_mean() == (2.0, 2)


def test_bf16_autocasts_the_forward_on_cpu(tmp_path):
    seen = []

    class Probe(DropoutMLP):
        def forward(self, x, labels=None):
            hidden = self.net[0](x)
            seen.append(hidden.dtype)
            return super().forward(x, labels)

    torch.manual_seed(0)
    trainer = Trainer(
        model=Probe(),
        args=quiet_args(tmp_path, max_steps=3, bf16=True, use_cpu=True),
        train_dataset=Regression(32),
    )
    output = trainer.train()
    assert seen == [torch.bfloat16] * 3
    assert math.isfinite(output.training_loss)
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())  # master weights stay fp32
    assert trainer.evaluate(Regression(8))["eval_loss"] > 0


def test_fp16_on_cpu_is_a_clear_error(tmp_path):
    with pytest.raises(TrainerConfigError, match="fp16 needs a CUDA GPU .*set 'bf16: true'"):
        Trainer(model=make_model(), args=quiet_args(tmp_path, fp16=True, use_cpu=True))


def test_early_stopping_stops_after_patience_and_keeps_its_state_in_checkpoints(tmp_path):
    class FixedEvalLoss(TrainerCallback):
        def __init__(self, *losses):
            self.losses = iter(losses)

        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            metrics["eval_loss"] = next(self.losses)

    early = EarlyStoppingCallback(early_stopping_patience=2)
    args = quiet_args(
        tmp_path,
        max_steps=20,
        eval_strategy="steps",
        eval_steps=1,
        save_strategy="steps",
        save_steps=1,
        metric_for_best_model="eval_loss",
    )
    trainer = Trainer(
        model=make_model(),
        args=args,
        train_dataset=Regression(64),
        eval_dataset=Regression(8),
        callbacks=[FixedEvalLoss(1.0, 0.5, 0.6, 0.55), early],
    )
    output = trainer.train()
    assert output.global_step == 4  # best at step 2, no progress at 3 and 4
    saved = trainer.state.load_from_json(latest_checkpoint(tmp_path) / "trainer_state.json")
    assert saved.stateful_callbacks["EarlyStoppingCallback"]["attributes"] == {
        "early_stopping_patience_counter": 2
    }

    resumed = EarlyStoppingCallback(early_stopping_patience=3)
    trainer = Trainer(
        model=make_model(),
        args=args,
        train_dataset=Regression(64),
        eval_dataset=Regression(8),
        callbacks=[FixedEvalLoss(0.55, 0.7, 0.1), resumed],
    )
    trainer.train(resume_from_checkpoint=str(tmp_path / "checkpoint-3"))
    assert trainer.state.global_step == 5  # the counter came back as 1: steps 4 and 5 do not improve on 0.5


def test_early_stopping_needs_a_metric(tmp_path):
    trainer = Trainer(
        model=make_model(),
        args=quiet_args(tmp_path, max_steps=2),
        train_dataset=Regression(16),
        callbacks=[EarlyStoppingCallback()],
    )
    with pytest.raises(TrainerConfigError, match="EarlyStoppingCallback needs 'metric_for_best_model'"):
        trainer.train()


def test_auto_find_batch_size_halves_after_out_of_memory(tmp_path):
    class OOMAbove8(DropoutMLP):
        def forward(self, x, labels=None):
            if x.shape[0] > 8:
                raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return super().forward(x, labels)

    built = []

    def model_init():
        built.append(1)
        return OOMAbove8()

    args = quiet_args(tmp_path, max_steps=3, per_device_train_batch_size=32, auto_find_batch_size=True)
    trainer = Trainer(model_init=model_init, args=args, train_dataset=Regression(64))
    output = trainer.train()
    assert trainer.state.train_batch_size == 8 and output.global_step == 3
    assert len(built) == 3  # a fresh model for each smaller batch size


def test_set_seed_repeats_the_random_streams():
    import random

    import numpy as np

    set_seed(123)
    first = (random.random(), np.random.rand(), torch.rand(1).item())
    set_seed(123)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == first


def test_full_determinism_turns_on_deterministic_algorithms(tmp_path, restores_determinism):
    assert not torch.are_deterministic_algorithms_enabled()
    Trainer(model=torch.nn.Linear(2, 1), args=quiet_args(tmp_path, full_determinism=True))
    assert torch.are_deterministic_algorithms_enabled()


def test_full_determinism_with_cuda_sets_the_cublas_workspace(monkeypatch, restores_determinism):
    # What a GPU machine does (torch's deterministic cuBLAS raises without the workspace setting), driven on any machine:
    # the branch only sets flags and variables, it starts no CUDA work.
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    enable_full_determinism(3)
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
    assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
