"""`hpo run study.yaml --launcher slurm --workers N`: the study's workers as one SLURM job array of N tasks.

Everything is checked before any job exists: the study file, its dry run (as `hpo run` does), a storage every node
reaches (not SQLite), sbatch on PATH; the study is opened (so its output folder is claimed, or refused) and then one
array is submitted. Then the command follows the study as `hpo run` does (a line per finished trial, the summary at the
end) until every task has ended; Ctrl-C cancels the array (scancel: running trials save and are queued again).
`--detach` returns once the job is submitted; `hpo status` shows its tasks, `hpo cancel` cancels it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import click
import optuna
from optuna.trial import FrozenTrial
from rich.console import Console

from hpo.cli.options import load_study, repeat_command
from hpo.errors import ConfigError, Interrupted
from hpo.integrations.slurm import (
    ACTIVE_STATES,
    SlurmJob,
    cancel,
    job_script,
    record_job,
    require_sbatch,
    submit,
    task_states,
)
from hpo.spec import StudySpec
from hpo.storage.folder_owner import open_study_in_its_folder
from hpo.storage.study_db import storage_url
from hpo.storage.urls import is_sqlite_url, redact
from hpo.study.manager import trial_budget
from hpo.study.summary import StudySummary, summarize
from hpo.trial.dry_run import dry_run as check_metrics

POLL_S = 2.0
SQLITE_REFUSAL = (
    "study.storage: a SLURM study needs a database every node reaches (PostgreSQL); SQLite lives on one machine's "
    "disk; give --storage postgresql://user:password@host/db"
)


def check_submission(
    spec: StudySpec, storage: str | None, n_trials: int | None, timeout: float | None
) -> str:
    """The refusals that need no database and no torch, each one line with exit 2; the storage URL."""
    trial_budget(spec, n_trials, timeout)  # a study that would never end
    url = storage_url(spec, storage)
    if is_sqlite_url(url):
        raise ConfigError(SQLITE_REFUSAL)
    require_sbatch()
    return url


def run_on_slurm(
    study_file: Path,
    storage: str | None,
    overrides: tuple[str, ...],
    *,
    tasks: int,
    n_trials: int | None,
    timeout: float | None,
    dry_run: bool,
    detach: bool,
    report: Callable[[FrozenTrial], None],
    console: Console,
) -> tuple[StudySpec, StudySummary | None]:
    """Check, submit, then follow (unless `detach`); the summary at the end, None when detached."""
    started = time.monotonic()
    spec = load_study(study_file, storage, overrides)
    url = check_submission(spec, storage, n_trials, timeout)
    if dry_run:
        check_metrics(spec)  # an objective metric evaluation does not produce: refused here, not in N tasks
    study = open_study_in_its_folder(spec, storage=storage)  # created once here; the tasks join it
    job = SlurmJob(spec, study_file, tasks=tasks, overrides=overrides, n_trials=n_trials, timeout=timeout)
    job_id = _submit(job, url)
    submitted_s = time.monotonic() - started
    console.print(f"study [bold]{spec.study.name}[/] on {redact(url)}")
    console.print(
        f"submitted SLURM job {job_id} ({tasks} task{'' if tasks == 1 else 's'}) in {submitted_s:.1f} s; "
        f"logs in {job.log_dir}",
        soft_wrap=True,  # a path cut in two cannot be copied
    )
    console.print(
        f"follow it with: hpo status {study_file}; cancel it with: hpo cancel {study_file}", soft_wrap=True
    )
    if detach:
        return spec, None
    _follow(study, job_id, tasks, report, console)
    return spec, summarize(spec, study, storage, duration_s=time.monotonic() - started)


def _submit(job: SlurmJob, url: str) -> str:
    job.log_dir.mkdir(parents=True, exist_ok=True)
    script = job.log_dir / f"job-{time.strftime('%Y%m%d-%H%M%S')}.sh"
    script.write_text(job_script(job))
    job_id = submit(script, url)
    record_job(job.spec.output_dir, job_id, job.tasks, script)
    return job_id


def _follow(
    study: optuna.Study, job_id: str, tasks: int, report: Callable[[FrozenTrial], None], console: Console
) -> None:
    """A line per trial as it finishes, until no task of the array is pending or running. Ctrl-C: scancel."""
    seen = {t.number for t in study.get_trials(deepcopy=False) if t.state.is_finished()}
    try:
        while True:
            states = task_states(job_id, tasks)
            seen |= _report_new(study, seen, report)
            if not any(state in ACTIVE_STATES for state in states.values()):
                break
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        cancel([job_id])
        raise Interrupted(
            f"stopped: cancelled SLURM job {job_id}; its running trials save a checkpoint and are queued again; "
            f"continue with: {repeat_command()}"
        ) from None
    ended = ", ".join(f"{task}: {state.lower()}" for task, state in sorted(states.items()))
    console.print(f"SLURM job {job_id} ended (tasks {ended})")


def _report_new(study: optuna.Study, seen: set[int], report: Callable[[FrozenTrial], None]) -> set[int]:
    new = [t for t in study.get_trials(deepcopy=False) if t.state.is_finished() and t.number not in seen]
    for trial in sorted(new, key=lambda t: t.number):
        report(trial)
    return {t.number for t in new}


def refuse_local_only_options(gpus: str | None, in_process: bool) -> None:
    """Options that place trials on this machine mean nothing for a job array."""
    if gpus is not None:
        raise click.UsageError(
            "--gpus places trials on this machine; a SLURM task gets its GPUs from launcher.gpus and "
            "resources.gpus_per_trial"
        )
    if in_process:
        raise click.UsageError(
            "--in-process runs trials in this process; it does not go with --launcher slurm"
        )
