"""The arguments every study command takes the same way: the study file, `--storage URL` and `--set key=value`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from hpo.errors import ConfigError


def study_arguments(command: Callable[..., Any]) -> Callable[..., Any]:
    """STUDY_FILE, --storage and --set (repeatable; the value parsed as YAML)."""
    command = click.option(
        "--set",
        "overrides",
        multiple=True,
        metavar="KEY=VALUE",
        help="Override a field of the study file, e.g. --set training.max_steps=200 (value parsed as YAML).",
    )(command)
    command = click.option(
        "--storage",
        metavar="URL",
        help="Optuna storage URL (sqlite:///..., postgresql://...) instead of the file's.",
    )(command)
    return click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))(command)


def trial_budget_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--n-trials and --timeout, as `hpo run` and `hpo worker` take them."""
    command = click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        metavar="S",
        help="Start no new trial after S seconds.",
    )(command)
    return click.option(
        "--n-trials",
        type=click.IntRange(min=1),
        metavar="N",
        help="Total trials of the study (finished ones count; default: study.n_trials).",
    )(command)


def load_study(study_file: Path, storage: str | None, overrides: tuple[str, ...]) -> Any:
    import optuna

    from hpo.spec import load_study_spec

    # The commands say what happened themselves; Optuna's INFO lines ("Using an existing study...") are noise here.
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if not study_file.is_file():
        raise ConfigError(f"{study_file}: no such study file")
    return load_study_spec(study_file, overrides=list(overrides), storage=storage)


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def format_params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={format_value(v)}" for k, v in params.items())


def format_values(values: list[float] | None) -> str:
    return "-" if not values else ", ".join(format_value(v) for v in values)
