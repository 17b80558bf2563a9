"""Experiment tracking: the experiment store (SQLite / PostgreSQL), wandb, TensorBoard and MLflow, plugged into the
Trainer as callbacks.

    store/            the experiment store: schema, interface, SQLite and PostgreSQL backends, `open_store`
    callbacks.py      `build_tracking_callbacks(spec, run=...)` and `finish_tracking(callbacks, outcome)`
    store_callback.py, wandb_callback.py   the store's and wandb's callbacks; writer.py: the store's background writer
    tensorboard_callback.py, mlflow_callback.py   a run folder / an MLflow run per trial (nested under the study's)
    events.py         events recorded outside the training loop; where a spec's store lives (`store_location`)
    run_info.py       who a run is; logs.py: what the callbacks read from the Trainer; environment.py, digest.py

`finish_tracking` ends each tracker's run with the trial's result before the next trial can start (wandb's with exit
code 0 for completed or pruned, 1 for failed) and flushes the store. When it is not called, a trial whose training
ended is finished as "completed" (or "pruned"), one whose training raised as "failed", when the next trial's callbacks
are built or the process exits.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["RunInfo", "build_tracking_callbacks", "finish_tracking", "trial_run_id"]

# Loaded on first use: the dashboards import `hpo.tracking.store` and must not pay for the Trainer callbacks (torch).
_LAZY = {
    "RunInfo": "hpo.tracking.run_info",
    "build_tracking_callbacks": "hpo.tracking.callbacks",
    "finish_tracking": "hpo.tracking.callbacks",
    "trial_run_id": "hpo.tracking.store.schema",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'hpo.tracking' has no attribute {name!r}")
