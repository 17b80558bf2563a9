"""How long a run is: steps per epoch, total optimizer steps, epochs, and the log/eval/save intervals in steps."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

from torch.utils.data import DataLoader

from trainer.args import TrainingArguments
from trainer.data import has_length
from trainer.errors import TrainerConfigError


@dataclass(frozen=True)
class TrainingPlan:
    steps_per_epoch: int | None  # None for a dataset without a length
    max_steps: int
    num_epochs: int
    logging_steps: int
    eval_steps: int
    save_steps: int


def _interval(value: float, max_steps: int) -> int:
    """An interval in steps: a whole number, or a fraction (< 1) of the run's steps."""
    return max(1, math.ceil(value * max_steps)) if value < 1 else int(value)


def build_plan(args: TrainingArguments, loader: DataLoader) -> TrainingPlan:
    accumulation = args.gradient_accumulation_steps
    steps_per_epoch = None
    if has_length(loader):
        if len(loader) == 0:
            raise TrainerConfigError(
                "the training set yields no batch: it is empty, or smaller than per_device_train_batch_size with "
                "dataloader_drop_last on"
            )
        steps_per_epoch = math.ceil(len(loader) / accumulation)
    if args.max_steps > 0:
        max_steps = args.max_steps
        num_epochs = math.ceil(max_steps / steps_per_epoch) if steps_per_epoch else sys.maxsize
    elif steps_per_epoch is None:
        raise TrainerConfigError("the training set has no length: set 'max_steps' to say how long to train")
    else:
        max_steps = max(1, math.ceil(args.num_train_epochs * steps_per_epoch))
        num_epochs = math.ceil(args.num_train_epochs)
    return TrainingPlan(
        steps_per_epoch=steps_per_epoch,
        max_steps=max_steps,
        num_epochs=num_epochs,
        logging_steps=_interval(args.logging_steps, max_steps),
        eval_steps=_interval(args.eval_interval, max_steps),
        save_steps=_interval(args.save_steps, max_steps),
    )
