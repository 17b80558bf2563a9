"""The Trainer callbacks every trial gets from the study manager, besides pruning and tracking.

TrialIdentityCallback   marks the Trainer's state as a trial's (transformers' names: trial_name, trial_params)
InterruptCallback       on SIGTERM from its worker: save a checkpoint at the next step boundary and stop
SlotStatusCallback      writes the slot's status file (step, max steps, latest metric, GPU memory) for the live table
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import torch

from trainer import TrainerCallback


class TrialIdentityCallback(TrainerCallback):
    """Marks the Trainer's state as a trial's (HF names), at train begin, after the Trainer has built its state."""

    def __init__(self, trial_name: str, trial_params: dict[str, Any]) -> None:
        self.trial_name = trial_name
        self.trial_params = dict(trial_params)

    def on_train_begin(self, args, state, control, **kwargs):
        state.trial_name = self.trial_name
        state.trial_params = dict(self.trial_params)
        state.is_hyper_param_search = True


# "setup": nothing to save yet, an interrupt ends the process; "training": stop at the next step boundary and save;
# "done": training ended, the trial is being scored: let it finish.
_interrupt = {"requested": False, "phase": "setup"}


def on_sigterm(signum: int, frame: Any) -> None:
    _interrupt["requested"] = True
    if _interrupt["phase"] == "setup":
        raise KeyboardInterrupt


def interrupt_requested() -> bool:
    """Whether this trial process was asked to stop (SIGTERM from its worker)."""
    return bool(_interrupt["requested"])


def reset_interrupt() -> None:
    """A fresh run in this process: no stop requested, nothing to save yet."""
    _interrupt.update(requested=False, phase="setup")


def begin_next_run() -> None:
    """The next run in a warm trial process: nothing to save yet. A stop asked meanwhile stays asked (the worker
    may signal as soon as it has sent the run)."""
    _interrupt["phase"] = "setup"


def on_interrupt(signum: int, frame: Any) -> None:
    """Ctrl-C of a run in the foreground (`hpo train`): the first asks for a checkpoint at the next step boundary and a
    stop, as SIGTERM does for a trial; a second one stops at once."""
    if _interrupt["requested"]:
        raise KeyboardInterrupt
    on_sigterm(signum, frame)


class InterruptCallback(TrainerCallback):
    """On SIGTERM: save a checkpoint at the next step boundary and stop training (every rank at the same step), unless
    that boundary is the last step."""

    def __init__(self) -> None:
        self.stopped_at: int | None = None
        self.first_step_at: float | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        _interrupt["phase"] = "training"

    def on_step_begin(self, args, state, control, **kwargs):
        if self.first_step_at is None:
            self.first_step_at = time.time()

    def on_step_end(self, args, state, control, **kwargs):
        requested = _interrupt["requested"]
        strategy = getattr(kwargs.get("trainer"), "strategy", None)
        if strategy is not None and getattr(strategy, "world_size", 1) > 1:
            requested = bool(strategy.broadcast_object(requested, src=0))
        # At the last step training ends here anyway: the trial is scored and saved as it would be unasked. Stopped
        # instead, it was queued again and its retry trained nothing (chaos retry-exception-preempt).
        if requested and self.stopped_at is None and state.global_step < state.max_steps:
            control.should_save = True
            control.should_training_stop = True
            self.stopped_at = state.global_step

    def on_train_end(self, args, state, control, **kwargs):
        _interrupt["phase"] = "done"


class SlotStatusCallback(TrainerCallback):
    """Writes the slot's status file (step, max steps, latest objective metric) for the live table, atomically: at
    train begin, then at most once a second (the table's refresh rate; each write is a file and a rename, a few
    milliseconds on a busy disk, which a 2-second trial notices). A new evaluation's metric goes out with the next
    write."""

    interval_s = 1.0

    def __init__(self, path: Path, metric: str | None, base: dict[str, Any]) -> None:
        self.path, self.metric, self.base = path, metric, dict(base)
        self.latest: dict[str, Any] = {}
        self.last_write = 0.0
        self.steps = 0  # steps taken in this process (a resumed trial starts at a later global step)

    def on_train_begin(self, args, state, control, **kwargs):
        self._write(state, force=True)

    def on_step_end(self, args, state, control, **kwargs):
        self.steps += 1
        self._write(state, force=self.steps <= 2)  # the GPU gate measures a trial from its second step on

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        for key in (self.metric, f"eval_{self.metric}", "eval_loss"):
            if key and metrics and key in metrics:
                self.latest = {"metric": key, "value": float(metrics[key])}
                break
        self._write(state)

    def _write(self, state: Any, force: bool = False) -> None:
        now = time.time()
        if not force and now - self.last_write < self.interval_s:
            return
        self.last_write = now
        record = {**self.base, "state": "running", "step": state.global_step, "max_steps": state.max_steps}
        record["steps_run"] = self.steps
        record["pid"] = os.getpid()  # hpo status leaves out the slots of processes that died without a word
        if torch.cuda.is_initialized():  # what this trial's PyTorch holds on its GPU now, and at most so far
            record["gpu_memory"] = torch.cuda.memory_reserved()
            record["gpu_memory_peak"] = torch.cuda.max_memory_reserved()
        write_status(self.path, {**record, **self.latest, "updated": now})


def write_status(path: Path, record: dict[str, Any]) -> None:
    try:
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(record, default=str))
        os.replace(temporary, path)
    except OSError:
        pass  # the table is a view; a full disk must not stop a trial
