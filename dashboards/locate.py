"""Where the dashboard reads from: a study or run file, or a storage URL, becomes an Optuna storage and a store location.

Same rules as the writers (CONTRACTS.md section 3): a study's store is `<output_dir>/experiments.db`, or the same
PostgreSQL database as its storage. Given only `--storage sqlite:///dir/study.db`, the store beside it is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hpo.errors import ConfigError


@dataclass(frozen=True)
class Sources:
    storage: str | None  # Optuna storage URL (None: a run file, single runs only)
    store: str | None  # experiment store path or URL (None: no store)
    study_file: str | None  # the study file, for the export commands the pages show
    study_name: str | None  # the study the file names
    objectives: list[str] | None = None  # the file's metric names, e.g. ["eval_accuracy"]


def store_beside(storage: str) -> str:
    if storage.startswith("postgresql"):
        return storage
    from dashboards.optuna_source import sqlite_path

    database = sqlite_path(storage)
    return str(database.parent / "experiments.db") if database is not None else ""


def locate(
    spec_file: Path | None, storage: str | None, store: str | None, overrides: tuple[str, ...]
) -> Sources:
    if spec_file is None:
        if storage is None and store is None:
            raise ConfigError(
                "give a study file (hpo dashboard study.yaml) or --storage URL (or --store for runs)"
            )
        return Sources(storage, store or (store_beside(storage) if storage else None), None, None)
    if not spec_file.is_file():
        raise ConfigError(f"{spec_file}: no such study or run file")
    from hpo.spec import StudySpec, load_spec
    from hpo.tracking.events import store_location

    spec = load_spec(spec_file, overrides=list(overrides), storage=storage)  # a run file or a study file
    if isinstance(spec, StudySpec):
        metrics = list(spec.study.metrics)
        return Sources(spec.storage, store or store_location(spec), str(spec_file), spec.name, metrics)
    return Sources(storage, store or store_location(spec), None, None)


def open_api(sources: Sources):
    """The API over what `sources` names (imports Optuna and SQLAlchemy: call after usage checks)."""
    from dashboards.api import DashboardApi
    from dashboards.optuna_source import OptunaSource
    from dashboards.store_reader import StoreReader

    source = OptunaSource(sources.storage) if sources.storage else None
    objectives = (
        {sources.study_name: sources.objectives} if sources.study_name and sources.objectives else None
    )
    return DashboardApi(
        source, StoreReader(sources.store), study_file=sources.study_file, objectives=objectives
    )
