"""Helpers for tests that drive the `hpo` command in a subprocess and read its study back from the storage."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial

from hpo.storage.database import create_storage

# A small PBT section the study tests share: 4 members, an exploit every 4 steps, the learning rate halved or doubled.
PBT = {
    "type": "pbt",
    "population": 4,
    "perturbation_interval": 4,
    "max_resource": 12,
    "quantile_fraction": 0.25,
    "resample_probability": 0.0,
    "mutations": {"learning_rate": {"factors": [0.5, 2.0]}},
}


def run_hpo(
    folder: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess:
    """`hpo ARGS` run in `folder` with one thread and wide lines (tables unwrapped), its output captured."""
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "250", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "hpo.cli", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        env=environment,
        timeout=timeout,
    )


def stored_trials(url: str, name: str) -> list[FrozenTrial]:
    """The study's trials, or none while it does not exist yet."""
    try:
        return optuna.load_study(study_name=name, storage=create_storage(url)).get_trials(deepcopy=False)
    except KeyError:
        return []
