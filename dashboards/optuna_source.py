"""Read Optuna studies from a storage URL, read-only, through Optuna's public API.

SQLite is opened with a read-only URI (`mode=ro`) so the dashboard can never write to a study it is watching; PostgreSQL
sessions are opened with `default_transaction_read_only`. Each study is loaded once with `optuna.load_study`, whose storage
caches finished trials: later reads fetch only new and unfinished trials, which keeps polling a 10,000-trial study cheap.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna

from hpo.errors import ConfigError, HpoError
from hpo.storage.urls import is_sqlite_url, sqlite_path, with_postgres_driver

optuna.logging.set_verbosity(optuna.logging.WARNING)


def watched_database(url: str) -> Path | None:
    """The SQLite file a storage URL names, None for a server database; an error for anything that cannot be watched."""
    if "://" not in url:
        raise ConfigError(f"storage {url!r} is not a database URL; e.g. sqlite:///runs/my-study/study.db")
    if not is_sqlite_url(url):
        return None
    database = sqlite_path(url)
    if database is None:
        raise ConfigError(
            f"storage {url!r}: an in-memory SQLite database cannot be watched; give a file path"
        )
    return database


def read_only_rdb_storage(url: str) -> optuna.storages.RDBStorage:
    """An RDBStorage that cannot write: a clear error when the database does not exist yet."""
    database = watched_database(url)
    if database is not None:
        if not database.is_file():
            raise HpoError(
                f"no study database at {database} (storage {url!r}); run `hpo run <study.yaml>` first, "
                "or pass --storage with the URL the study uses"
            )
        ro_url = f"sqlite:///file:{database.resolve()}?mode=ro&uri=true"
        engine_kwargs: dict[str, Any] = {"connect_args": {"timeout": 30}}
    else:
        ro_url = with_postgres_driver(url)
        engine_kwargs = {"connect_args": {"options": "-c default_transaction_read_only=on"}}
    try:
        return optuna.storages.RDBStorage(ro_url, engine_kwargs=engine_kwargs, skip_table_creation=True)
    except Exception as error:
        raise HpoError(f"cannot open the study storage {url!r}: {error}") from None


class OptunaSource:
    """All studies of one storage. Thread-safe: the HTTP server reads from several threads."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.storage = read_only_rdb_storage(url)
        self._studies: dict[str, optuna.Study] = {}
        self._lock = threading.Lock()
        # called with each study's name once warm_up has loaded it (the API encodes its trials' JSON there)
        self.warm_up_hooks: list[Callable[[str], object]] = []

    def study_names(self) -> list[str]:
        # Not optuna.get_all_study_summaries: it counts every study's trials from scratch (seconds for 10,000).
        return [study.study_name for study in self.storage.get_all_studies()]

    def study(self, name: str) -> optuna.Study | None:
        """The loaded study, or None when the storage holds no study of that name."""
        with self._lock:
            study = self._studies.get(name)
            if study is None:
                try:
                    study = optuna.load_study(study_name=name, storage=self.storage)
                except KeyError:
                    return None
                self._studies[name] = study
            return study

    def trials(self, name: str) -> list[optuna.trial.FrozenTrial]:
        """Every trial of the study (not copied: treat as read-only). Incremental after the first call."""
        study = self.study(name)
        if study is None:
            return []
        try:
            return study.get_trials(deepcopy=False)
        except KeyError:  # deleted (and maybe created again) since we loaded it, e.g. from optuna-dashboard
            with self._lock:
                self._studies.pop(name, None)
            study = self.study(name)
            return study.get_trials(deepcopy=False) if study is not None else []

    def warm_up(self) -> None:
        """Load every study once (seconds for 10,000 trials) so the first page view does not wait for it."""
        for name in self.study_names():
            self.trials(name)
            for hook in self.warm_up_hooks:
                hook(name)
