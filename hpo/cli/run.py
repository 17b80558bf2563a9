"""`hpo run study.yaml`: run (or continue) a study, then print its best trial."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

import click
from optuna.trial import FrozenTrial
from rich.console import Console

from hpo.cli.ahead import file_launcher, start_ahead
from hpo.cli.app import summary
from hpo.cli.options import (
    dry_run_option,
    format_params,
    format_values,
    load_study,
    parse_gpus,
    placement_options,
    study_arguments,
    trial_budget_options,
    trial_line,
    trial_stops_say_how_to_continue,
)
from hpo.storage import remote

if TYPE_CHECKING:
    from hpo.study.summary import StudySummary


@click.command("run", short_help=summary("run"))
@study_arguments
@trial_budget_options
@placement_options
@dry_run_option
@click.option(
    "--in-process", is_flag=True, help="Run every trial in this process, one after another (for debugging)."
)
@click.option(
    "--launcher",
    type=click.Choice(["local", "slurm"]),
    default=None,
    help="Where the workers run: processes on this machine (local), or a SLURM job array of --workers tasks "
    "(default: the file's launcher.type, else local).",
)
@click.option(
    "--detach",
    is_flag=True,
    help="With --launcher slurm: return once the job is submitted (hpo status follows it).",
)
def run(
    study_file: Path,
    storage: str | None,
    overrides: tuple[str, ...],
    n_trials: int | None,
    timeout: float | None,
    workers: int | None,
    gpus: str | None,
    dry_run: bool,
    in_process: bool,
    launcher: str | None,
    detach: bool,
) -> None:
    """Run a study, or continue it.

    Runs the study in STUDY_FILE. n_trials counts every trial the study has, so running the same command again runs only the missing ones and
    resumes trials an interrupt or a crash stopped. Ctrl-C: running trials save a checkpoint and stop; the command
    says what was saved and how to continue.

    \b
    Example:
      hpo run studies/digits_mlp.yaml --workers 2
      hpo run studies/digits_mlp.yaml --n-trials 40    (again: raise the total and continue)
      hpo run studies/digits_mlp.yaml --launcher slurm --workers 8 --storage postgresql://user@db/hpo"""
    console = Console(soft_wrap=True)  # a line piped to a log stays one line (rich wraps at 80 columns there)
    gpu_ids = parse_gpus(gpus)  # a usage error before anything is loaded
    finished: list[FrozenTrial] = []

    def report(trial: FrozenTrial) -> None:
        finished.append(trial)
        console.print(trial_line(trial))

    if (launcher or file_launcher(study_file, overrides)) == "slurm":
        # Imported here: it loads the study manager and the dry run (torch, 1.5 s), which a local run defers until
        # its workers have started (hpo.cli.ahead).
        from hpo.cli.slurm import refuse_local_only_options, run_on_slurm

        refuse_local_only_options(gpus, in_process)
        spec, summary = run_on_slurm(
            study_file,
            storage,
            overrides,
            tasks=workers or 1,
            n_trials=n_trials,
            timeout=timeout,
            dry_run=dry_run,
            detach=detach,
            report=report,
            console=console,
        )
        if summary is not None:
            _print_summary(console, summary, finished, n_trials or spec.study.n_trials, spec.output_dir)
        return
    with trial_stops_say_how_to_continue():
        # The workers start first: their imports (torch, the trial code) then overlap with this process's own.
        ahead = None if in_process else start_ahead(study_file, overrides, workers, gpu_ids)
        with ahead or contextlib.nullcontext():  # those no slot took end here, however the run ends
            # Imported now, not with this module: the study manager imports torch (1.5 s), which the workers just
            # started are importing too, on the other cores.
            from hpo.study.manager import run_loaded_study

            spec = load_study(study_file, storage, overrides)
            console.print(f"study [bold]{spec.study.name}[/] -> {spec.output_dir}")
            summary = run_loaded_study(
                spec,
                n_trials=n_trials,
                timeout=timeout,
                storage=storage,
                workers=workers,
                gpus=gpu_ids,
                report=report,
                dry_run=dry_run,
                in_process=in_process,
                ahead=ahead,
            )
    _print_summary(console, summary, finished, n_trials or spec.study.n_trials, spec.output_dir)


def _print_summary(
    console: Console,
    summary: StudySummary,
    finished: list[FrozenTrial],
    n_trials: int | None,
    output_dir: str,
) -> None:
    # An attempt queued again (out of GPU memory beside others, a crash) is not a trial this run finished: its retry is.
    ran = sum(1 for trial in finished if not trial.user_attrs.get("requeued"))
    console.print(_run_line(summary, ran, n_trials))
    if not summary.best_trials:
        console.print("no trial completed")
        return
    label = "best trial" if len(summary.directions) == 1 else "Pareto front"
    for best in summary.best_trials:
        console.print(
            f"{label}: #{best.number} {', '.join(summary.metrics)} = {format_values(best.values)} "
            f"({format_params(best.params)}); checkpoint: {_checkpoint_text(best.best_checkpoint, output_dir)}"
        )


def _run_line(summary: StudySummary, ran: int, n_trials: int | None) -> str:
    """What this run did, then what the study holds: a second run of a finished study must not read as if it had
    just run every trial in a few seconds."""
    counts = ", ".join(f"{n} {state.lower()}" for state, n in summary.counts.items()) or "no trials"
    done = sum(n for state, n in summary.counts.items() if state in ("COMPLETE", "PRUNED", "FAIL"))
    if ran == 0 and n_trials is not None and done >= n_trials:
        held = (
            f"its {n_trials} trials" if done == n_trials else f"{done} trials, at least the {n_trials} asked"
        )
        return (
            f"[bold]{summary.study_name}[/]: nothing to run, the study already has {held} ({counts}); to run more, "
            "raise the total with --n-trials"
        )
    return (
        f"[bold]{summary.study_name}[/]: this run finished {ran} trial{'' if ran == 1 else 's'} in "
        f"{summary.duration_s or 0:.1f} s; the study has {counts}"
    )


def _checkpoint_text(path: str | None, output_dir: str) -> str:
    """Where the best checkpoint is: a local path, or its URL when the output folder is an object store."""
    if path is None:
        return "-"
    return remote.shown(path, output_dir) or f"{path} (deleted: outside study.keep_checkpoints.top_k)"
