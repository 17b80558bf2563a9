"""Gradient accumulation: batch 32 x 1 step equals batch 8 x 4 accumulated, also for the last, shorter window."""

from __future__ import annotations

import pytest
import torch
from trainer_tasks import DropoutMLP, Regression, quiet_args

from trainer import Trainer


def train(tmp_path, n_samples: int, batch: int, accumulation: int, epochs: int = 2) -> Trainer:
    torch.manual_seed(0)
    model = DropoutMLP(dropout=0.0)  # no batch-dependent layers, no randomness in the forward pass
    args = quiet_args(
        tmp_path,
        per_device_train_batch_size=batch,
        gradient_accumulation_steps=accumulation,
        num_train_epochs=epochs,
        logging_steps=1,
        learning_rate=1e-2,
        max_grad_norm=1.0,
    )
    trainer = Trainer(model=model, args=args, train_dataset=Regression(n_samples))
    trainer.train()
    return trainer


def assert_close_weights(a: Trainer, b: Trainer, tolerance: float = 1e-6) -> None:
    for (name, x), (_, y) in zip(a.model.state_dict().items(), b.model.state_dict().items(), strict=True):
        assert torch.allclose(x, y, atol=tolerance, rtol=0), f"{name}: max diff {(x - y).abs().max()}"


@pytest.mark.parametrize("n_samples", [64, 44])  # 44: the last window holds micro-batches of 8 and 4 samples
def test_accumulated_steps_equal_one_big_batch(tmp_path, n_samples):
    big = train(tmp_path / "big", n_samples, batch=32, accumulation=1)
    small = train(tmp_path / "small", n_samples, batch=8, accumulation=4)
    assert big.state.global_step == small.state.global_step == 4
    assert_close_weights(big, small)
    big_losses = [e["loss"] for e in big.state.log_history if "loss" in e]
    small_losses = [e["loss"] for e in small.state.log_history if "loss" in e]
    assert small_losses == pytest.approx(big_losses, abs=1e-6)
    grad_norms = [e["grad_norm"] for e in small.state.log_history if "grad_norm" in e]
    assert grad_norms == pytest.approx(
        [e["grad_norm"] for e in big.state.log_history if "grad_norm" in e], abs=1e-5
    )


def test_the_last_short_window_is_one_optimizer_step(tmp_path):
    # 5 micro-batches per epoch with accumulation 4: windows of 4 and 1 -> 2 optimizer steps per epoch
    trainer = train(tmp_path, n_samples=40, batch=8, accumulation=4, epochs=3)
    assert trainer.state.global_step == 6 and trainer.state.max_steps == 6
    assert trainer.state.epoch == 3.0
