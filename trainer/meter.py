"""The running training loss between two logs, with non-finite filtering and the non-finite streak check.

On CPU reading a scalar costs nothing, so the CPU meter works in Python floats and raises at once. On an accelerator
`.item()` is a CPU-GPU sync point: that meter keeps tensors and is read only at logging steps (and every
`max_non_finite_steps` steps for the streak), so the hot loop never waits for the device.
"""

from __future__ import annotations

import math

import torch

from trainer.errors import NonFiniteLossError


def _streak_error(limit: int, step: int) -> NonFiniteLossError:
    return NonFiniteLossError(
        f"the training loss was NaN or infinite for {limit} optimizer steps in a row (last at step {step}); "
        "lower the learning rate, set max_grad_norm, or check the data for invalid values "
        "(max_non_finite_steps sets how many such steps are tolerated)"
    )


class FloatLossMeter:
    """CPU meter: every step's loss as a Python float."""

    def __init__(self, filter_non_finite: bool, max_non_finite_steps: int) -> None:
        self.filter = filter_non_finite
        self.limit = max_non_finite_steps
        self.total = 0.0
        self.count = 0
        self.streak = 0

    def add(self, step_loss: torch.Tensor, step: int) -> None:
        value = step_loss.item()
        if math.isfinite(value):
            self.streak = 0
        else:
            self.streak += 1
            if self.streak >= self.limit:
                raise _streak_error(self.limit, step)
            if self.filter:
                return
        self.total += value
        self.count += 1

    def check(self, step: int) -> None:
        """Nothing to do: add() already raised."""

    def pop_mean(self) -> tuple[float, int]:
        """Mean loss since the last call and the number of steps it covers; resets the meter."""
        mean = self.total / self.count if self.count else math.nan
        total_count = self.count
        self.total, self.count = 0.0, 0
        return mean, total_count


class TensorLossMeter:
    """Accelerator meter: sums on the device, read at logging steps only."""

    def __init__(self, filter_non_finite: bool, max_non_finite_steps: int, device: torch.device) -> None:
        self.filter = filter_non_finite
        self.limit = max_non_finite_steps
        self.total = torch.zeros((), device=device)
        self.count = torch.zeros((), device=device)
        self.streak = torch.zeros((), device=device)
        self.worst_streak = torch.zeros((), device=device)
        self.steps_since_check = 0

    def add(self, step_loss: torch.Tensor, step: int) -> None:
        finite = torch.isfinite(step_loss)
        if self.filter:
            self.total += torch.where(finite, step_loss, 0.0)
            self.count += finite
        else:
            self.total += step_loss
            self.count += 1
        self.streak = (self.streak + 1) * (~finite)
        torch.maximum(self.worst_streak, self.streak, out=self.worst_streak)
        self.steps_since_check += 1
        if self.steps_since_check >= self.limit:
            self.check(step)

    def check(self, step: int) -> None:
        self.steps_since_check = 0
        if self.worst_streak.item() >= self.limit:  # a sync point, once every `limit` steps
            raise _streak_error(self.limit, step)
        self.worst_streak.zero_()

    def pop_mean(self) -> tuple[float, int]:
        count = int(self.count.item())  # a sync point, at logging steps only
        mean = (self.total / count).item() if count else math.nan
        self.total.zero_()
        self.count.zero_()
        return mean, count


def create_loss_meter(device: torch.device, filter_non_finite: bool, max_non_finite_steps: int):
    if device.type == "cpu":
        return FloatLossMeter(filter_non_finite, max_non_finite_steps)
    return TensorLossMeter(filter_non_finite, max_non_finite_steps, device)
