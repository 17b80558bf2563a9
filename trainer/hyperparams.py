"""Change hyperparameters of a run between two optimizer steps (population-based training, and its replay).

    schedule = HyperparameterSchedule({400: {"learning_rate": 2e-3, "weight_decay": 0.05}}, model_setters={...})
    Trainer(..., callbacks=[schedule]).train(resume_from_checkpoint=...)

At the start of the step after `global_step == 400` the new values go into the optimizer's param groups: the learning
rate becomes the schedule's new base (`initial_lr` and the scheduler's `base_lrs`), so warm-up and decay continue from
the same point of the schedule with the new peak (an absolute end rate, polynomial's `lr_end` or `min_lr`, stays
where it was set); weight decay changes in the decayed group only (biases and norms stay at 0); Adam's betas and epsilon in every group that has them. Model hyperparameters (dropout) go through the setters
the task gives. The same callback applies the change in a run that continues a copied checkpoint and in one that
trains straight through, so the two are bitwise equal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from trainer.callbacks import TrainerCallback
from trainer.optim import rebased_multiplier

# TrainingArguments fields kept in the optimizer's param groups: (group key, index into a tuple value or None).
OPTIMIZER_FIELDS: dict[str, tuple[str, int | None]] = {
    "learning_rate": ("lr", None),
    "weight_decay": ("weight_decay", None),
    "adam_beta1": ("betas", 0),
    "adam_beta2": ("betas", 1),
    "adam_epsilon": ("eps", None),
}
ModelSetter = Callable[[torch.nn.Module, Any], None]


def apply_hyperparameters(
    optimizer: torch.optim.Optimizer, scheduler: Any, values: Mapping[str, Any]
) -> None:
    """Put `values` (TrainingArguments names) into the optimizer's param groups and the scheduler's base rates."""
    unknown = sorted(set(values) - set(OPTIMIZER_FIELDS))
    if unknown:
        raise ValueError(
            f"cannot change {', '.join(unknown)} mid-run; changeable: {', '.join(OPTIMIZER_FIELDS)}"
        )
    for index, group in enumerate(optimizer.param_groups):
        for name, value in values.items():
            key, position = OPTIMIZER_FIELDS[name]
            if name == "learning_rate":
                _set_base_lr(group, scheduler, index, float(value))
            elif key not in group:
                continue  # e.g. betas under SGD: the optimizer has no such value
            elif name == "weight_decay":
                if group[key] != 0:  # the no-decay group (biases, norms) stays without decay
                    group[key] = float(value)
            elif position is not None:
                items = list(group[key])
                items[position] = float(value)
                group[key] = tuple(items)
            else:
                group[key] = float(value)
    if "learning_rate" in values and scheduler is not None and hasattr(scheduler, "_last_lr"):
        scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]  # what get_last_lr() reports


def _set_base_lr(group: dict[str, Any], scheduler: Any, index: int, lr: float) -> None:
    """The new peak rate, and the current rate where the schedule stands now (its multiplier at `last_epoch`)."""
    lambdas = getattr(scheduler, "lr_lambdas", None)
    if lambdas is not None:  # LambdaLR: rate = base * multiplier(step), the formula its own step() uses
        lambdas[index] = rebased_multiplier(lambdas[index], lr)  # an absolute end rate stays where it was set
        scheduler.base_lrs[index] = lr
        group["initial_lr"] = lr
        group["lr"] = lr * lambdas[index](scheduler.last_epoch)
        return
    old_base = group.get("initial_lr", group["lr"])
    # ReduceLROnPlateau (or no scheduler): keep the reductions made so far, relative to the new base.
    group["lr"] = lr if not old_base else group["lr"] * (lr / old_base)
    group["initial_lr"] = lr


class HyperparameterSchedule(TrainerCallback):
    """Apply `changes[step]` at the start of the step that follows `global_step == step` (optimizer values through
    `apply_hyperparameters`, model values through `model_setters[name](model, value)`)."""

    def __init__(
        self, changes: Mapping[int, Mapping[str, Any]], model_setters: Mapping[str, ModelSetter] | None = None
    ) -> None:
        self.changes = {int(step): dict(values) for step, values in changes.items()}
        self.model_setters = dict(model_setters or {})
        self.applied: list[int] = []
        for step, values in self.changes.items():
            unknown = sorted(set(values) - set(OPTIMIZER_FIELDS) - set(self.model_setters))
            if unknown:
                changeable = ", ".join([*OPTIMIZER_FIELDS, *self.model_setters])
                raise ValueError(
                    f"step {step}: cannot change {', '.join(unknown)} mid-run; changeable: {changeable}"
                )

    def on_step_begin(self, args, state, control, **kwargs):
        step = state.global_step
        values = self.changes.get(step)
        if values is None or step in self.applied:
            return
        optimizer_values = {k: v for k, v in values.items() if k in OPTIMIZER_FIELDS}
        if optimizer_values:
            apply_hyperparameters(kwargs["optimizer"], kwargs.get("lr_scheduler"), optimizer_values)
        for name, value in values.items():
            if name in self.model_setters:
                self.model_setters[name](kwargs["model"], value)
        self.applied.append(step)
