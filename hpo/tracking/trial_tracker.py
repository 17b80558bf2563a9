"""What every per-trial tracker shares (the experiment store, wandb, TensorBoard, MLflow): the end of training noted,
and the trial's result recorded once, whoever calls `finish` first (the study manager, or the fallback that closes a
trial's trackers)."""

from __future__ import annotations

from typing import Any

from hpo.tracking.logs import pruned_by_sibling
from trainer.callbacks import TrainerCallback


class TrialTracker(TrainerCallback):
    def __init__(self) -> None:
        self.global_step = 0
        self.train_ended = False
        self.pruned_seen = False  # a pruning callback beside this one stopped the training
        self.finished = False

    def on_train_end(self, args, state, control, **kwargs):
        self.train_ended = True
        self.pruned_seen = pruned_by_sibling(kwargs)
        self.global_step = state.global_step

    def finish(
        self,
        status: str,
        values: list[float] | None = None,
        best_step: int | None = None,
        error: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        """Record how the trial ended: once, however often it is called."""
        if self.finished:
            return
        self.finished = True
        self.record_end(status, values, best_step, error, data or {})

    def record_end(
        self,
        status: str,
        values: list[float] | None,
        best_step: int | None,
        error: str | None,
        data: dict[str, Any],
    ) -> None:
        raise NotImplementedError
