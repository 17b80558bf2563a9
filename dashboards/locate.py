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

    spec = load_spec(spec_file, overrides=list(overrides), storage=storage)
    if isinstance(spec, StudySpec):
        return Sources(spec.storage, store or store_location(spec), str(spec_file), spec.name)
    return Sources(storage, store or store_location(spec), None, None)
