"""A fresh MLflow tracking store for a test, seen as a new process sees it."""

from __future__ import annotations

from pathlib import Path

import mlflow
import pytest


def fresh_mlflow_store(folder: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A SQLite store in MLFLOW_TRACKING_URI, with none of MLflow's process-wide choices of an earlier test (its
    tracking URI, its active experiment: a script sets them once, a test process runs many scripts). Its URI."""
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    monkeypatch.setattr(mlflow.tracking._tracking_service.utils, "_tracking_uri", None)
    monkeypatch.setattr(mlflow.tracking.fluent, "_active_experiment_id", None)
    return uri
