"""The trial half of pause/resume: stop a trial at a pause point with a checkpoint, so it can continue later exactly.

`PauseCallback(points, resource, metric, decide)` watches for the pause points (global steps, or epoch numbers with
`resource="epochs"`). At each one it makes the Trainer evaluate and save a checkpoint there, passes the evaluation's
`metric` to `decide(point, value)`, and when that returns True stops training at that step: the trial has paused. The
trial's outcome then has state WAITING, `user_attrs["paused_step"]` and `user_attrs["paused_checkpoint"]`
(`hpo.trial.run` builds it), and the worker records the pause in the database (`hpo.storage.pause`).

Resuming is `run_trial(..., resume_from=<that checkpoint>)`: the Trainer restores weights, optimizer, scheduler, data
position and random state bitwise, so a trial paused and resumed any number of times ends with the same weights as one
trained straight through, provided the schedule was laid out for the full length from the start (the study's
`max_steps` / `num_train_epochs` is the scheduler's max_resource) and the straight run evaluates at the same steps.

Under torch.distributed rank 0 decides and the decision is broadcast, so every rank stops, and saves, at the same step.
Schedulers that pause (ASHA, population-based training) differ only in `decide`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from trainer import TrainerCallback

Resource = Literal["steps", "epochs"]
# (pause point, the metric's value there or None) -> True to pause. Runs on rank 0 only.
Decide = Callable[[int, float | None], bool]
# (pause point) -> True to train on in place after all, once the checkpoint there is on disk. Runs on rank 0 only.
AfterSave = Callable[[int], bool]


def always_pause(point: int, value: float | None) -> bool:
    return True


class PauseCallback(TrainerCallback):
    checkpoint_may_be_in_flight = (
        True  # on_save waits for the checkpoint only at a pause point, where it acts
    )

    def __init__(
        self,
        points: Sequence[int],
        metric: str,
        decide: Decide = always_pause,
        resource: Resource = "steps",
        is_rank_zero: bool = True,
        after_save: AfterSave | None = None,
    ) -> None:
        self.points = set(int(p) for p in points)
        self.metric, self.decide, self.resource, self.is_rank_zero = metric, decide, resource, is_rank_zero
        self.after_save = after_save
        self.pending: int | None = None  # the pause point whose evaluation is awaited
        self.forced_save = False  # the save at the pending point is ours, not the save schedule's
        self.paused_point: int | None = None
        self.paused_step: int | None = None
        self.paused_value: float | None = None
        self.decided_at: float | None = None  # unix time of the decision to pause (the save and exit follow)
        self.passed: list[tuple[int, int, float | None]] = []  # (point, step, value) of points passed on

    def _arm(self, point: int, control: Any) -> None:
        self.pending = point
        self.forced_save = not control.should_save
        control.should_evaluate = True
        control.should_save = True

    def on_step_end(self, args, state, control, **kwargs):
        if self.resource == "steps" and state.global_step in self.points:
            self._arm(state.global_step, control)

    def on_epoch_end(self, args, state, control, **kwargs):
        epoch = round(state.epoch or 0)
        if (
            self.resource == "epochs"
            and epoch in self.points
            and math.isclose(state.epoch or 0, epoch, abs_tol=1e-6)
        ):
            self._arm(epoch, control)

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if self.pending is None:
            return
        point, self.pending = self.pending, None
        value = _as_float((metrics or {}).get(self.metric))
        pause = self.decide(point, value) if self.is_rank_zero else False
        strategy = getattr(kwargs.get("trainer"), "strategy", None)
        if strategy is not None and getattr(strategy, "world_size", 1) > 1:
            pause = bool(strategy.broadcast_object(pause, src=0))
        if not pause:
            self.passed.append((point, state.global_step, value))
            if self.forced_save:
                control.should_save = False  # training goes on in place: no checkpoint needed here
            return
        self.paused_point, self.paused_step, self.paused_value = point, state.global_step, value
        self.decided_at = time.time()
        control.should_training_stop = True

    def on_save(self, args, state, control, **kwargs):
        """A scheduler whose decision needs the checkpoint on disk first (PBT: others may copy it) may still let the
        trial train on in place here, instead of pausing, exiting and being restored."""
        if self.after_save is None or self.paused_step != state.global_step or self.paused_point is None:
            return
        trainer = kwargs.get("trainer")
        if trainer is not None:
            trainer.wait_for_checkpoints()  # in place before anyone may copy it (PBT's exploit)
        go_on = self.after_save(self.paused_point) if self.is_rank_zero else False
        strategy = getattr(trainer, "strategy", None)
        if strategy is not None and getattr(strategy, "world_size", 1) > 1:
            go_on = bool(strategy.broadcast_object(go_on, src=0))
        if not go_on:
            return
        self.passed.append((self.paused_point, state.global_step, self.paused_value))
        self.paused_point = self.paused_step = self.paused_value = self.decided_at = None
        control.should_training_stop = False


def find_pause(callbacks: Iterable[Any]) -> PauseCallback | None:
    """The pause callback among a trial's callbacks, if it paused the trial."""
    for callback in callbacks:
        if isinstance(callback, PauseCallback) and callback.paused_step is not None:
            return callback
    return None


def _as_float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
