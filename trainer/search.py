"""Hyperparameter-search backends for `Trainer.hyperparameter_search`, looked up by name.

The Trainer knows no search library. A backend is a function
`search(trainer, hp_space, compute_objective, n_trials, direction, hp_name, **kwargs) -> BestRun`; a package offers one
under the entry-point group `trainer.search_backends` (hpo offers "optuna", see pyproject.toml), or registers it in
code with `register_search_backend`. Entry points are read on the first search, so `import trainer` stays light.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from typing import Any

ENTRY_POINT_GROUP = "trainer.search_backends"
DEFAULT_BACKEND = "optuna"

SearchBackend = Callable[..., Any]
_backends: dict[str, SearchBackend] = {}


def register_search_backend(name: str, search: SearchBackend) -> None:
    """Make `Trainer.hyperparameter_search(backend=name)` call `search`."""
    _backends[name] = search


def search_backend(name: str | None) -> SearchBackend:
    """The backend called `name` (default: optuna); a ValueError that lists the available ones otherwise."""
    name = name or DEFAULT_BACKEND
    if name not in _backends:
        _load_entry_points()
    if name not in _backends:
        available = ", ".join(f"'{known}'" for known in sorted(_backends)) or "none is installed"
        hint = " (pip install hpo)" if name == DEFAULT_BACKEND else ""
        raise ValueError(
            f"backend={name!r}: no hyperparameter-search backend of that name{hint}; only the {available} backend "
            "is available"
        )
    return _backends[name]


def _load_entry_points() -> None:
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        _backends.setdefault(entry_point.name, entry_point.load())
