"""`hpo cancel study.yaml`: cancel the study's SLURM jobs (scancel); their running trials save and are queued again."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from hpo.cli.app import summary
from hpo.cli.options import load_study, study_arguments
from hpo.integrations.slurm import active_jobs, recorded_jobs
from hpo.integrations.slurm import cancel as scancel


@click.command("cancel", short_help=summary("cancel"))
@study_arguments
def cancel(study_file: Path, storage: str | None, overrides: tuple[str, ...]) -> None:
    """Cancel a study's SLURM jobs.

    Cancels every job `hpo run --launcher slurm` submitted for the study in STUDY_FILE that still has a task pending
    or running. SLURM sends each task SIGTERM: its running trial saves a checkpoint and is queued again, so the next
    `hpo run` (or submission) resumes it.

    \b
    Example:
      hpo cancel studies/digits_mlp.yaml"""
    spec = load_study(study_file, storage, overrides)
    console = Console(soft_wrap=True)  # a line piped to a log stays one line (rich wraps at 80 columns there)
    if not recorded_jobs(spec.output_dir):
        console.print(f"study {spec.study.name} has no SLURM job (none submitted from {spec.output_dir})")
        return
    jobs = active_jobs(spec.output_dir)
    if not jobs:
        console.print(f"study {spec.study.name}: every SLURM job has ended already; nothing to cancel")
        return
    scancel(jobs)
    console.print(
        f"cancelled SLURM job{'s' if len(jobs) > 1 else ''} {', '.join(jobs)}: running trials save a checkpoint "
        "and are queued again"
    )
