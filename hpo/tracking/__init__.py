"""Experiment tracking: the experiment store (SQLite / PostgreSQL) and wandb, plugged into the Trainer as callbacks.

How `hpo.trial` (and `hpo train`) use it:

    run = RunInfo(kind="trial", study_name=study.study_name, trial_number=trial.number, params=params,
                  output_dir=str(trial_dir), slot=slot, devices=devices)
    callbacks = build_tracking_callbacks(spec, run=run)   # fresh instances for every trial
    trainer = Trainer(..., callbacks=[pruning_callback, *callbacks])
    try:
        trainer.train()
    finally:
        finish_tracking(callbacks, outcome)   # status, objective, best step -> store and wandb; closes both

`finish_tracking` ends the wandb run with the right exit code (0 completed/pruned, 1 failed) before the next trial can
start, and flushes the store. When it is not called, `on_train_end` finishes them as "completed", and a trial whose
training raised is finished as "failed" when the next trial's callbacks are built or the process exits.
"""

from __future__ import annotations

from typing import Any

from hpo.tracking.run_info import RunInfo, trial_run_id

__all__ = ["RunInfo", "build_tracking_callbacks", "finish_tracking", "trial_run_id"]


def build_tracking_callbacks(spec: Any, *, run: RunInfo) -> list[Any]:
    """Fresh callbacks recording this run in the experiment store and (when configured) in wandb."""
    from hpo.tracking.callbacks import build_callbacks

    return build_callbacks(spec, run)


def finish_tracking(callbacks: list[Any], outcome: Any = None, **fields: Any) -> None:
    """Close the tracking callbacks with the trial's result.

    `outcome` is a `hpo.trial.TrialOutcome` (state, values, pruned_step, error, user_attrs) or None; keyword
    `fields` override it: status ("completed" | "pruned" | "failed" | "interrupted"), values (list of floats),
    best_step, error (message). Other callbacks in the list are ignored, so the Trainer's whole list may be passed.
    """
    from hpo.tracking.callbacks import finish_all

    finish_all(callbacks, outcome, **fields)
