"""Pruning by callback: report the objective after each evaluation and stop the trial cleanly when Optuna says so.

Unlike an exception raised from inside the loop (transformers' way), stopping through `control.should_training_stop`
lets the Trainer finish its step, run every callback's `on_train_end` (trackers close their runs, loggers flush) and
return normally; the trial is then told PRUNED with the step at which it was pruned.

Under torch.distributed only rank 0 holds the Optuna trial. It decides, and the decision is broadcast through the
Trainer's strategy so that every rank stops at the same step and no collective is left waiting.
"""

from __future__ import annotations

import math
from typing import Any

from trainer import TrainerCallback

PARAMETER_COUNT_KEY = "eval_num_parameters"


class ObjectiveTracker(TrainerCallback):
    """Keeps every evaluation's metrics with its step, so a trial can be scored by its best or its last evaluation.

    Each record also holds `eval_num_parameters` (the model's parameter count), so a study can trade accuracy against
    model size (`metrics: [accuracy, num_parameters]`) without the task computing it."""

    def __init__(self, count_parameters: bool = True) -> None:
        self.evaluations: list[tuple[int, dict[str, float]]] = []
        self.count_parameters = count_parameters
        self.num_parameters: int | None = None

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if not metrics:
            return
        record = {k: _as_float(v) for k, v in metrics.items()}
        if self.count_parameters and self.num_parameters is None and kwargs.get("model") is not None:
            # ZeRO-3 leaves each rank a partition; `ds_numel` is the full size. FSDP2's DTensors report the full size.
            self.num_parameters = sum(getattr(p, "ds_numel", p.numel()) for p in kwargs["model"].parameters())
        if self.num_parameters is not None:
            record.setdefault(PARAMETER_COUNT_KEY, float(self.num_parameters))
        self.evaluations.append((state.global_step, record))

    def with_history(self, log_history: list[dict[str, Any]]) -> list[tuple[int, dict[str, float]]]:
        """The evaluations of the whole run: a run resumed from a checkpoint also has those logged before the
        checkpoint (its restored `state.log_history`), which this tracker, started after the resume, did not see."""
        first = self.evaluations[0][0] if self.evaluations else None
        earlier = []
        for entry in log_history:
            step = entry.get("step")
            if (
                step is None
                or (first is not None and step >= first)
                or not any(k.startswith("eval_") for k in entry)
            ):
                continue
            record = {k: _as_float(v) for k, v in entry.items() if k.startswith("eval_")}
            if self.num_parameters is not None:
                record.setdefault(PARAMETER_COUNT_KEY, float(self.num_parameters))
            earlier.append((int(step), record))
        return earlier + self.evaluations


class OptunaPruningCallback(TrainerCallback):
    """Reports `metric` (eval metrics dict key, e.g. `eval_accuracy`) to the trial at the global step of each evaluation.

    `objective` may instead be a callable(metrics) -> float (the `compute_objective` of `hyperparameter_search`).
    `trial` may be None on ranks other than 0; those ranks only receive the decision."""

    def __init__(self, trial: Any, metric: str | None = None, objective: Any = None) -> None:
        if (metric is None) == (objective is None):
            raise ValueError("OptunaPruningCallback needs exactly one of `metric` or `objective`")
        self.trial = trial
        self.metric = metric
        self.objective = objective
        self.pruned_step: int | None = None
        self.pruned_value: float | None = None

    def value_of(self, metrics: dict[str, Any]) -> float | None:
        if self.objective is not None:
            return _as_float(self.objective(dict(metrics)))
        return _as_float(metrics[self.metric]) if self.metric in metrics else None

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if self.pruned_step is not None or not metrics:
            return
        value = self.value_of(metrics)
        decision = self._decide(state.global_step, value, kwargs.get("trainer"))
        if decision:
            self.pruned_step = state.global_step
            self.pruned_value = value
            control.should_training_stop = True

    def _decide(self, step: int, value: float | None, trainer: Any) -> bool:
        strategy = getattr(trainer, "strategy", None)
        is_zero = strategy is None or strategy.is_global_zero
        decision = False
        if is_zero and self.trial is not None and value is not None and math.isfinite(value):
            # A non-finite value is not reported: Optuna's pruners would compare NaN and decide nothing useful; a
            # non-finite objective fails the trial when it ends.
            self.trial.report(value, step)
            decision = bool(self.trial.should_prune())
        if strategy is not None and getattr(strategy, "world_size", 1) > 1:
            decision = bool(strategy.broadcast_object(decision, src=0))
        return decision


def _as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
