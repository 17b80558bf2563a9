"""`hpo best study.yaml`: the best trial (or the Pareto front with several objectives), its parameters, and where its
best checkpoint is."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click
from rich.console import Console

from hpo.cli.app import summary
from hpo.cli.options import format_params, format_value, load_study, study_arguments
from hpo.errors import HpoError
from hpo.storage import remote
from hpo.storage.study_db import load_existing_study
from hpo.study.summary import summarize


@click.command("best", short_help=summary("best"))
@study_arguments
@click.option("--json", "as_json", is_flag=True, help="Print the best trial(s) as JSON.")
def best(study_file: Path, storage: str | None, overrides: tuple[str, ...], as_json: bool) -> None:
    """Show the best trial (or the Pareto front).

    The best trial of the study in STUDY_FILE, its parameters and its checkpoint; with several objectives, the
    Pareto front.

    \b
    Example:
      hpo best studies/digits_mlp.yaml --json"""
    spec = load_study(study_file, storage, overrides)
    summary = summarize(spec, load_existing_study(spec, storage), storage)
    if not summary.best_trials:
        raise HpoError(f"study '{summary.study_name}' has no completed trial yet ({_counts(summary.counts)})")
    if as_json:
        click.echo(json.dumps([asdict(t) for t in summary.best_trials], indent=2))
        return
    console = Console(soft_wrap=True)  # a line piped to a log stays one line (rich wraps at 80 columns there)
    if len(summary.directions) > 1:
        console.print(f"Pareto front of {summary.study_name}: {len(summary.best_trials)} trial(s)")
    for trial in summary.best_trials:
        values = ", ".join(
            f"{m} = {format_value(v)}" for m, v in zip(summary.metrics, trial.values or [], strict=False)
        )
        console.print(f"[bold]trial {trial.number}[/]: {values} (best step {trial.best_step})")
        console.print(f"  params: {format_params(trial.params)}")
        checkpoint = trial.best_checkpoint
        where = (
            "-"
            if checkpoint is None
            else (
                remote.shown(checkpoint, spec.output_dir)
                or f"{checkpoint} (deleted: outside study.keep_checkpoints.top_k)"
            )
        )
        console.print(f"  checkpoint: {where}")
        console.print(f"  run folder: {trial.run_dir}")


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {state.lower()}" for state, n in counts.items()) or "no trials"
