"""`hpo run study.yaml`: run (or continue) a study, then print its best trial."""

from __future__ import annotations

from pathlib import Path

import click
from optuna.trial import FrozenTrial
from rich.console import Console

from hpo.commands.study_args import (
    format_params,
    format_values,
    load_study,
    study_arguments,
    trial_budget_options,
)
from hpo.commands.train import Interrupted
from hpo.summary import StudySummary


@click.command("run", short_help="Run a study, or continue it.")
@study_arguments
@trial_budget_options
@click.option("--workers", type=click.IntRange(min=1), help="Trials in parallel on CPU (one process each).")
@click.option("--gpus", metavar="IDS", help="GPUs to use, e.g. 0,1,3 (default: all visible).")
@click.option(
    "--no-dry-run", is_flag=True, help="Skip the dry evaluation that checks the metric before trials start."
)
@click.option(
    "--in-process", is_flag=True, help="Run every trial in this process, one after another (for debugging)."
)
def run(
    study_file: Path,
    storage: str | None,
    overrides: tuple[str, ...],
    n_trials: int | None,
    timeout: float | None,
    workers: int | None,
    gpus: str | None,
    no_dry_run: bool,
    in_process: bool,
) -> None:
    """Run the study in STUDY_FILE, or continue it.

    n_trials counts every trial the study has, so running the same command again runs only the missing ones and
    resumes trials an interrupt or a crash stopped. Ctrl-C: running trials save a checkpoint and are queued again."""
    from hpo.study import run_loaded_study

    console = Console()
    gpu_ids = _parse_gpus(gpus)  # a usage error before anything is loaded
    spec = load_study(study_file, storage, overrides)
    console.print(f"study [bold]{spec.study.name}[/] -> {spec.output_dir}")
    finished: list[FrozenTrial] = []

    def report(trial: FrozenTrial) -> None:
        finished.append(trial)
        console.print(_trial_line(trial))

    try:
        summary = run_loaded_study(
            spec,
            n_trials=n_trials,
            timeout=timeout,
            storage=storage,
            workers=workers,
            gpus=gpu_ids,
            report=report,
            dry_run=not no_dry_run,
            in_process=in_process,
        )
    except KeyboardInterrupt:  # --in-process, or before the workers started (they handle Ctrl-C themselves)
        raise Interrupted(
            "interrupted; run the same command again: it finds a trial this stopped and resumes it from its "
            "newest checkpoint"
        ) from None
    console.print(_run_line(summary, len(finished), n_trials or getattr(spec.study, "n_trials", None)))
    if not summary.best_trials:
        console.print("no trial completed")
        return
    label = "best trial" if len(summary.directions) == 1 else "Pareto front"
    for best in summary.best_trials:
        console.print(
            f"{label}: #{best.number} {', '.join(summary.metrics)} = {format_values(best.values)} "
            f"({format_params(best.params)}); checkpoint: {_checkpoint_text(best.best_checkpoint)}"
        )


def _run_line(summary: StudySummary, ran: int, n_trials: int | None) -> str:
    """What this run did, then what the study holds: a second run of a finished study must not read as if it had
    just run every trial in a few seconds."""
    counts = ", ".join(f"{n} {state.lower()}" for state, n in summary.counts.items()) or "no trials"
    done = sum(n for state, n in summary.counts.items() if state in ("COMPLETE", "PRUNED", "FAIL"))
    if ran == 0 and n_trials is not None and done >= n_trials:
        return (
            f"[bold]{summary.study_name}[/]: nothing to run, the study already has its {n_trials} trials "
            f"({counts}); to run more, raise the total with --n-trials"
        )
    return (
        f"[bold]{summary.study_name}[/]: this run finished {ran} trial{'' if ran == 1 else 's'} in "
        f"{summary.duration_s or 0:.1f} s; the study has {counts}"
    )


def _checkpoint_text(path: str | None) -> str:
    if path is None:
        return "-"
    return path if Path(path).is_dir() else f"{path} (deleted: outside study.keep_checkpoints.top_k)"


def _trial_line(trial: FrozenTrial) -> str:
    attrs = trial.user_attrs
    line = f"trial {trial.number:>3} {trial.state.name:<8}"
    if trial.state.name == "PRUNED":
        line += f" at step {attrs.get('pruned_step')}"
    elif trial.values is not None:
        line += f" {format_values(list(trial.values))}"
    if attrs.get("duration_s") is not None:
        line += f"  {attrs['duration_s']:.1f} s"
    line += f"  {format_params(trial.params)}"
    if attrs.get("error"):
        line += f"\n    error: {attrs['error']}"
    return line


def _parse_gpus(gpus: str | None) -> list[int] | None:
    if gpus is None:
        return None
    try:
        return [int(g) for g in gpus.split(",") if g.strip()]
    except ValueError:
        raise click.BadParameter(
            f"{gpus!r}: give GPU numbers separated by commas, e.g. 0,1,3", param_hint="--gpus"
        ) from None
