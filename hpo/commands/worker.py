"""`hpo worker study.yaml --storage postgresql://...`: join a study from this machine.

Each machine runs its own slots (its GPUs, or --workers CPU processes) against the shared storage; n_trials is a total
for the study, kept exactly across machines by the storage's claim lock. Start it on as many machines as you like,
while `hpo run` runs or without it."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from hpo.commands.run import _parse_gpus, _trial_line
from hpo.commands.study_args import load_study, study_arguments, trial_budget_options
from hpo.errors import ConfigError


@click.command("worker", short_help="Run a study's trials on this machine too.")
@study_arguments
@trial_budget_options
@click.option("--workers", type=click.IntRange(min=1), help="Trials in parallel on this machine's CPU.")
@click.option("--gpus", metavar="IDS", help="This machine's GPUs to use, e.g. 0,1,3 (default: all visible).")
def worker(
    study_file: Path,
    storage: str | None,
    overrides: tuple[str, ...],
    n_trials: int | None,
    timeout: float | None,
    workers: int | None,
    gpus: str | None,
) -> None:
    """Run trials of the study in STUDY_FILE on this machine, beside other machines sharing its --storage."""
    from hpo.resume import requeue_stale_trials
    from hpo.scheduler import run_trials
    from hpo.study import open_study, redact, storage_url

    console = Console()
    gpu_ids = _parse_gpus(gpus)  # a usage error before anything is loaded
    spec = load_study(study_file, storage, overrides)
    url = storage_url(spec, storage)
    if url.startswith("sqlite"):
        console.print(
            "[yellow]note:[/] SQLite serves one machine; give --storage postgresql://... to share the study"
        )
    n_trials = n_trials if n_trials is not None else spec.study.n_trials
    timeout = timeout if timeout is not None else spec.study.timeout
    if n_trials is None and timeout is None:
        raise ConfigError(
            "study.n_trials: give n_trials or timeout (or --n-trials / --timeout), else it never ends"
        )
    study = open_study(spec, storage=storage)
    requeue_stale_trials(study, spec)  # trials this host left running
    console.print(f"worker joined study [bold]{spec.study.name}[/] on {redact(url)}")
    run_trials(
        spec,
        study,
        n_trials=n_trials,
        timeout=timeout,
        workers=workers,
        gpus=gpu_ids,
        report=lambda trial: console.print(_trial_line(trial)),
    )
    counts = {}
    for trial in study.get_trials(deepcopy=False):
        counts[trial.state.name.lower()] = counts.get(trial.state.name.lower(), 0) + 1
    console.print(f"study {spec.study.name}: " + ", ".join(f"{n} {state}" for state, n in counts.items()))
