"""Builds the tracking callbacks of one run and finishes them with its result.

    run = RunInfo(kind="trial", study_name=study.study_name, trial_number=trial.number, params=params,
                  output_dir=str(trial_dir), slot=slot, devices=devices)
    callbacks = build_tracking_callbacks(spec, run=run)   # fresh instances for every trial
    trainer = Trainer(..., callbacks=[pruning_callback, *callbacks])
    try:
        trainer.train()
    finally:
        finish_tracking(callbacks, outcome)   # status, objective, best step -> store and wandb; closes both

The study manager calls `finish_tracking(callbacks, outcome)` once the trial's outcome is known. Callbacks it never
finished (a trial that raised inside training, or a caller that does not know about finishing) are finished with the
best status we can tell: when the next run's callbacks are built in the same process, and at interpreter exit. So a
wandb run never stays open into the next trial.
"""

from __future__ import annotations

import atexit
import logging
from pathlib import Path
from typing import Any, Protocol

from optuna.trial import TrialState

from hpo.spec import Spec, StudySpec
from hpo.tracking.events import store_location
from hpo.tracking.mlflow_callback import MLflowTrialCallback
from hpo.tracking.run_info import RunInfo
from hpo.tracking.store_callback import ExperimentStoreCallback
from hpo.tracking.tensorboard_callback import TensorBoardTrialCallback
from hpo.tracking.wandb_callback import WandbCallback, default_mode
from trainer import TrainerCallback

logger = logging.getLogger(__name__)

_unfinished: list[Any] = []  # this process's tracking callbacks that have not been finished yet
# the callbacks that record how a run ended (`finish(status, values, best_step, error, data)`)
FINISHED_BY_OUTCOME = (ExperimentStoreCallback, WandbCallback, TensorBoardTrialCallback, MLflowTrialCallback)
_STATUS = {"COMPLETE": "completed", "PRUNED": "pruned", "FAIL": "failed", "WAITING": "paused"}


def build_tracking_callbacks(spec: Spec, *, run: RunInfo) -> list[TrainerCallback]:
    """Fresh callbacks recording this run in the experiment store and (when configured) in wandb."""
    finish_leftovers()
    callbacks: list[Any] = []
    location = store_location(spec)
    if location is not None:
        callbacks.append(ExperimentStoreCallback(location, run))
    wandb_settings = spec.tracking.wandb
    if wandb_settings is not None and default_mode(wandb_settings.mode) != "disabled":
        callbacks.append(WandbCallback(wandb_settings, run, directory=wandb_directory(spec, run)))
    objectives = list(spec.study.metrics or []) if isinstance(spec, StudySpec) else []
    if spec.tracking.tensorboard is not None:
        folder = tensorboard_directory(spec, run) / tensorboard_run_name(run)
        names = list(spec.search_space) if isinstance(spec, StudySpec) else []
        callbacks.append(TensorBoardTrialCallback(run, folder, objectives, names))
    if spec.tracking.mlflow is not None:
        output_dir = wandb_directory(spec, run)
        callbacks.append(
            MLflowTrialCallback(spec.tracking.mlflow, run, output_dir=output_dir, objectives=objectives)
        )
    _unfinished.extend(callbacks)
    return callbacks


def wandb_directory(spec: Spec, run: RunInfo) -> Path:
    """The study's output folder for trials (all trials' runs side by side), the run's own folder for a run."""
    if run.kind == "trial" and isinstance(spec, StudySpec):
        return Path(spec.output_dir)
    return Path(run.output_dir)


def tensorboard_directory(spec: Spec, run: RunInfo) -> Path:
    """`tracking.tensorboard.log_dir`, else `tensorboard/` in the study's (the run's) output folder."""
    configured = spec.tracking.tensorboard.log_dir if spec.tracking.tensorboard else None
    return Path(configured) if configured else wandb_directory(spec, run) / "tensorboard"


def tensorboard_run_name(run: RunInfo) -> str:
    """`trial-<number>` of the trial's first attempt (a retry continues its folder); the run's name for a run."""
    return run.name if run.kind != "trial" else f"trial-{run.first_attempt}"


def finish_tracking(callbacks: list[Any], outcome: TrialResult | None = None, **fields: Any) -> None:
    """Close the tracking callbacks with the trial's result.

    `outcome` is a `hpo.trial.run.TrialOutcome` (state, values, pruned_step, error, user_attrs) or None; keyword
    `fields` override it: status ("completed" | "pruned" | "failed" | "interrupted"), values (list of floats),
    best_step, error (message). Other callbacks in the list are ignored, so the Trainer's whole list may be passed.
    """
    result = outcome_fields(outcome) if outcome is not None else {}
    result.update(fields)
    result.setdefault("status", "completed")
    for callback in callbacks:
        if isinstance(callback, FINISHED_BY_OUTCOME):
            _finish_one(callback, result)


class TrialResult(Protocol):
    """How a trial ended, as `hpo.trial.run.TrialOutcome` says it (tracking sits below the trial layer)."""

    state: TrialState
    values: list[float] | None
    pruned_step: int | None
    error: str | None
    user_attrs: dict[str, Any]


def outcome_fields(outcome: TrialResult) -> dict[str, Any]:
    """status, values, best_step, error of a trial's outcome."""
    attrs = outcome.user_attrs
    best_step = attrs.get("best_step")
    if best_step is None:
        best_step = outcome.pruned_step
    data = {k: attrs[k] for k in ("pruned_step", "duration_s", "best_checkpoint") if attrs.get(k) is not None}
    return {
        "status": _STATUS.get(outcome.state.name, "interrupted"),
        "values": list(outcome.values) if outcome.values else None,
        "best_step": best_step,
        "error": outcome.error,
        "data": data,
    }


def _finish_one(callback: Any, result: dict[str, Any]) -> None:
    try:
        callback.finish(**result)
    except Exception as error:  # tracking must never turn a finished trial into a failed one
        logger.warning("could not finish %s for %s: %s", type(callback).__name__, callback.run.run_id, error)
    if callback in _unfinished:
        _unfinished.remove(callback)


def finish_leftovers() -> None:
    """Finish callbacks nobody finished: "completed" (or "pruned") when training ended, else "failed"."""
    for callback in list(_unfinished):
        if callback.train_ended:
            status = "pruned" if callback.pruned_seen else "completed"
            _finish_one(callback, {"status": status})
        else:
            _finish_one(
                callback, {"status": "failed", "error": "training did not finish (it raised or was stopped)"}
            )


atexit.register(finish_leftovers)
