"""`hpo worker study.yaml --storage postgresql://...`: join a study from this machine.

Each machine runs its own slots (its GPUs, or --workers CPU processes) against the shared storage; n_trials is a total
for the study, kept exactly across machines by the storage's claim lock. Start it on as many machines as you like,
while `hpo run` runs or without it."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from hpo.cli.app import summary
from hpo.cli.options import (
    load_study,
    parse_gpus,
    placement_options,
    study_arguments,
    trial_budget_options,
    trial_line,
    trial_stops_say_how_to_continue,
)
from hpo.storage.study_db import storage_url
from hpo.storage.urls import is_sqlite_url, redact
from hpo.study.manager import join_study, trial_budget


@click.command("worker", short_help=summary("worker"))
@study_arguments
@trial_budget_options
@placement_options
def worker(
    study_file: Path,
    storage: str | None,
    overrides: tuple[str, ...],
    n_trials: int | None,
    timeout: float | None,
    workers: int | None,
    gpus: str | None,
) -> None:
    """Run a study's trials on this machine too.

    Runs trials of the study in STUDY_FILE on this machine, beside other machines sharing its --storage.

    \b
    Example:
      hpo worker studies/digits_mlp.yaml --storage postgresql://user@db-host/hpo --gpus 0,1"""
    console = Console(soft_wrap=True)  # a line piped to a log stays one line (rich wraps at 80 columns there)
    gpu_ids = parse_gpus(gpus)  # a usage error before anything is loaded
    spec = load_study(study_file, storage, overrides)
    url = storage_url(spec, storage)
    trial_budget(spec, n_trials, timeout)  # a study that would never end is refused before anything is opened
    if is_sqlite_url(url):
        console.print(
            "[yellow]note:[/] SQLite serves one machine; give --storage postgresql://... to share the study"
        )
    console.print(f"worker joined study [bold]{spec.study.name}[/] on {redact(url)}")
    with trial_stops_say_how_to_continue():
        study = join_study(
            spec,
            n_trials=n_trials,
            timeout=timeout,
            storage=storage,
            workers=workers,
            gpus=gpu_ids,
            report=lambda trial: console.print(trial_line(trial)),
        )
    counts: dict[str, int] = {}
    for trial in study.get_trials(deepcopy=False):
        counts[trial.state.name.lower()] = counts.get(trial.state.name.lower(), 0) + 1
    console.print(f"study {spec.study.name}: " + ", ".join(f"{n} {state}" for state, n in counts.items()))
