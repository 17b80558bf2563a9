"""Where the dashboard reads from: an Optuna storage URL and an experiment store location, and the API over them.

The command line turns a study or run file into these (`hpo.cli.dashboard.locate`); the dashboards never load study
files. Same rules as the writers: a study's store is `<output_dir>/experiments.db`, or the same PostgreSQL database as
its storage. Given only `--storage sqlite:///dir/study.db`, the store beside it is used.
"""

from __future__ import annotations

from dataclasses import dataclass

from dashboards.api import DashboardApi
from dashboards.optuna_source import OptunaSource
from dashboards.store_reader import StoreReader
from hpo.storage.urls import is_postgres_url, sqlite_path


@dataclass(frozen=True)
class Sources:
    storage: str | None  # Optuna storage URL (None: a run file, single runs only)
    store: str | None  # experiment store path or URL (None: no store)
    study_file: str | None  # the study file, for the export commands the pages show
    study_name: str | None  # the study the file names
    objectives: list[str] | None = None  # the file's metric names, e.g. ["eval_accuracy"]


def store_beside(storage: str) -> str:
    """The experiment store of a study known only by its storage URL."""
    if is_postgres_url(storage):
        return storage
    database = sqlite_path(storage)
    return str(database.parent / "experiments.db") if database is not None else ""


def open_api(sources: Sources) -> DashboardApi:
    """The API over what `sources` names."""
    source = OptunaSource(sources.storage) if sources.storage else None
    objectives = (
        {sources.study_name: sources.objectives} if sources.study_name and sources.objectives else None
    )
    return DashboardApi(
        source, StoreReader(sources.store), study_file=sources.study_file, objectives=objectives
    )
