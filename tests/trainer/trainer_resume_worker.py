"""Run as a subprocess: train a DropoutMLP to a checkpoint, or resume from one, and write the final weights.

python tests/trainer/trainer_resume_worker.py OUTPUT_DIR MAX_STEPS STOP_AT RESUME(0|1) WEIGHTS_OUT [CRASH_IN_SAVE_AT]
"""

from __future__ import annotations

import os
import sys

import torch
from trainer_tasks import Regression, make_model, quiet_args

from trainer import Trainer, TrainerCallback


class StopAt(TrainerCallback):
    """Stops training after step `stop_at` (like a process told to exit), saving there first."""

    def __init__(self, stop_at: int) -> None:
        self.stop_at = stop_at

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.stop_at:
            control.should_save = True
            control.should_training_stop = True


def crash_while_saving_at(step: int) -> None:
    """Kill the process in the middle of writing checkpoint `step` (after the weights, before the state)."""
    from trainer.strategies.single import SingleDeviceStrategy

    original = SingleDeviceStrategy.save_checkpoint

    def save_then_die(self, directory, model, optimizer, scheduler):
        original(self, directory, model, optimizer, scheduler)
        if directory.name == f".checkpoint-{step}.tmp":
            os._exit(17)

    SingleDeviceStrategy.save_checkpoint = save_then_die


def train(output_dir: str, max_steps: int, stop_at: int = 0, resume: bool = False) -> dict[str, torch.Tensor]:
    """Shuffled data, dropout, a cosine schedule with warmup: every source of state a resume must restore."""
    args = quiet_args(
        output_dir,
        max_steps=max_steps,
        per_device_train_batch_size=8,
        save_strategy="steps",
        save_steps=3,
        lr_scheduler_type="cosine",
        warmup_steps=2,
    )
    callbacks = [StopAt(stop_at)] if stop_at > 0 else []
    trainer = Trainer(model=make_model(), args=args, train_dataset=Regression(n=60), callbacks=callbacks)
    trainer.train(resume_from_checkpoint=True if resume else None)
    return trainer.model.state_dict()


def main() -> None:
    output_dir, max_steps, stop_at, resume, weights_out = sys.argv[1:6]
    if len(sys.argv) > 6:
        crash_while_saving_at(int(sys.argv[6]))
    torch.set_num_threads(1)
    torch.save(train(output_dir, int(max_steps), int(stop_at), resume == "1"), weights_out)


if __name__ == "__main__":
    main()
