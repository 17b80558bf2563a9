"""Experiment tracking: the experiment store (sqlite-utils / PostgreSQL) and wandb, plugged into the Trainer as callbacks.

Contract used by `hpo.trial` and `hpo train` (the tracking work fills these in):

    build_tracking_callbacks(spec, *, run: RunInfo) -> list[TrainerCallback]
"""

from __future__ import annotations

from typing import Any


def build_tracking_callbacks(spec: Any, *, run: Any) -> list[Any]:
    """Callbacks that record this run's metrics, events and artifacts. Filled in by the tracking work."""
    return []
