"""A study's workers as one SLURM job array: the job script, and the sbatch / squeue / sacct / scancel calls.

    script = job_script(SlurmJob(spec, study_file, tasks=4, ...))   # text only: unit-tested without a cluster
    job_id = submit(script_path, storage_url)                      # sbatch --parsable
    record_job(spec.output_dir, job_id, tasks, script_path)        # <output_dir>/.hpo/slurm/jobs.json
    task_states(job_id, tasks)                                     # {0: "RUNNING", 1: "ended", ...}
    cancel([job_id])                                               # scancel: SIGTERM, trials save and are queued again

Each array task runs `hpo worker STUDY --storage URL` (one slot: `--workers 1` on CPU, the task's GPUs otherwise) with
the command's `--set` overrides; the tasks share nothing but the storage, as `hpo worker` on any machine does. The
commands are called directly (no submitit): nothing to install beyond the cluster's own client tools.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hpo.errors import ConfigError, HpoError
from hpo.spec import StudySpec
from hpo.spec.output_url import remote_url

# The environment variable that carries the storage URL into the job: the script holds no password.
STORAGE_VARIABLE = "HPO_SLURM_STORAGE"
# squeue states of a task that has not ended yet; any other (COMPLETED, CANCELLED, FAILED, TIMEOUT, ...) has.
ACTIVE_STATES = frozenset(
    {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING"}
)
ENDED = "ended"  # a task neither squeue nor sacct lists any more: it ended a while ago
UNKNOWN = "unknown (no squeue on this machine)"
COMMAND_TIMEOUT_S = 30


@dataclass
class SlurmJob:
    """What the job script needs: the study (its resources and launcher sections), the file and options each task
    passes to `hpo worker`, and where it runs from."""

    spec: StudySpec
    study_file: Path
    tasks: int
    overrides: Sequence[str] = ()
    n_trials: int | None = None
    timeout: float | None = None
    python: str = field(default_factory=lambda: sys.executable)
    workdir: Path = field(default_factory=Path.cwd)

    @property
    def log_dir(self) -> Path:
        return slurm_dir(self.spec.output_dir, self.workdir)


def slurm_dir(output_dir: str, workdir: Path | None = None) -> Path:
    """`<output_dir>/.hpo/slurm`, absolute (a job runs from --chdir, but the logs' paths must not depend on it)."""
    folder = Path(output_dir).expanduser()
    return (folder if folder.is_absolute() else (workdir or Path.cwd()) / folder) / ".hpo" / "slurm"


def cpus_per_task(spec: StudySpec) -> int:
    """launcher.cpus_per_task, else one trial's cores: threads_per_trial x ranks (1 thread when unset)."""
    if spec.launcher.cpus_per_task is not None:
        return spec.launcher.cpus_per_task
    return (spec.resources.threads_per_trial or 1) * spec.resources.ranks


def sbatch_directives(job: SlurmJob) -> list[str]:
    """The `#SBATCH` options: the array, the logs, where it runs, and what each task asks for."""
    launcher, log_dir = job.spec.launcher, job.log_dir
    options = [
        f"--job-name=hpo-{job.spec.name}",
        f"--array=0-{job.tasks - 1}",
        f"--output={log_dir}/%A_%a.out",
        f"--error={log_dir}/%A_%a.err",
        "--open-mode=append",  # a requeued (preempted) task adds to its log
        f"--chdir={job.workdir}",  # relative paths in the study file mean what they meant here
        "--ntasks=1",
        f"--cpus-per-task={cpus_per_task(job.spec)}",
        # Only the batch shell (the worker: the script execs it) hears USR1: it tells its trials to save and stop;
        # the whole job would get SIGTERM at the limit, too late to save a large model.
        f"--signal=B:USR1@{launcher.signal_grace}",
    ]
    if launcher.gpus:
        options.append(f"--gpus-per-task={job.spec.resources.gpus_per_trial}")
    for name in ("partition", "time", "account", "qos", "mem"):
        value = getattr(launcher, name)
        if value is not None:
            options.append(f"--{name}={value}")
    return options + list(launcher.sbatch_options)


def worker_command(job: SlurmJob) -> list[str]:
    """`hpo worker` as each task runs it; the storage is the environment variable, expanded by the shell."""
    words = [job.python, "-m", "hpo.cli", "worker", str(job.study_file.resolve())]
    if not job.spec.launcher.gpus:
        words += ["--workers", "1"]  # one CPU slot per task (and no GPU the task was not given)
    if job.n_trials is not None:
        words += ["--n-trials", str(job.n_trials)]
    if job.timeout is not None:
        words += ["--timeout", str(job.timeout)]
    for override in job.overrides:
        words += ["--set", override]
    if job.spec.resources.threads_per_trial is None:
        # The task's CPUs, not the node's: without CPU binding (task/none) a task sees every core of the node, and
        # the default (usable cores / ranks) would oversubscribe the cores other tasks were given.
        threads = max(1, cpus_per_task(job.spec) // job.spec.resources.ranks)
        words += ["--set", f"resources.threads_per_trial={threads}"]
    return words


def job_script(job: SlurmJob) -> str:
    directives = "\n".join(f"#SBATCH {shlex.quote(option)}" for option in sbatch_directives(job))
    command = shlex.join(worker_command(job))
    return f"""#!/bin/bash
# hpo: study {job.spec.name}, {job.tasks} worker task(s); written by `hpo run --launcher slurm`.
{directives}
{_scratch_line(job)}# The storage URL comes from the environment sbatch was called with (${STORAGE_VARIABLE}): no password in this file.
# exec: the worker is the batch shell itself, so the USR1 of --signal=B:... reaches it.
exec {command} --storage "${STORAGE_VARIABLE}"
"""


def _scratch_line(job: SlurmJob) -> str:
    """With checkpoints in an object store (study.output_dir: s3://...), each task works in a scratch folder of its
    own on its node's disk ($HPO_SCRATCH, else $TMPDIR or /tmp) and shares nothing but the store and the database."""
    if remote_url(job.spec.output_dir) is None:
        return ""
    folder = "${HPO_SCRATCH:-${TMPDIR:-/tmp}}/hpo-task-${SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID}_${SLURM_ARRAY_TASK_ID:-0}"
    return f'# Checkpoints go to the object store; this task keeps its local copies here.\nexport HPO_SCRATCH="{folder}"\n'


def require_sbatch() -> str:
    """The sbatch command, or a one-line refusal (exit 2) saying how to get it."""
    found = shutil.which("sbatch")
    if found is None:
        raise ConfigError(
            "--launcher slurm: sbatch is not on PATH; run hpo on a SLURM login node (or install the SLURM client "
            "tools, e.g. Debian's slurm-client), or use --launcher local"
        )
    return found


def _call(command: list[str], *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except FileNotFoundError:
        raise HpoError(
            f"{command[0]} is not on PATH: run this on a machine with the SLURM client tools"
        ) from None
    except subprocess.TimeoutExpired:
        raise HpoError(
            f"{command[0]} gave no answer in {COMMAND_TIMEOUT_S} s: is slurmctld reachable?"
        ) from None


def submit(script: Path, storage_url: str) -> str:
    """sbatch the script; the job id. The storage URL travels in the environment sbatch passes to the job."""
    done = _call(["sbatch", "--parsable", str(script)], env={**os.environ, STORAGE_VARIABLE: storage_url})
    if done.returncode != 0:
        raise HpoError(f"sbatch refused the job: {_last_line(done.stderr)} (script: {script})")
    return done.stdout.strip().split(";", 1)[0]  # --parsable: "id" or "id;cluster"


def record_job(output_dir: str, job_id: str, tasks: int, script: Path) -> None:
    """Append the job to `<output_dir>/.hpo/slurm/jobs.json`, which `hpo status` and `hpo cancel` read."""
    path = slurm_dir(output_dir) / "jobs.json"
    jobs = recorded_jobs(output_dir)
    jobs.append({"job_id": job_id, "tasks": tasks, "script": str(script), "submitted": time.time()})
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(jobs, indent=1))
    temporary.replace(path)


def recorded_jobs(output_dir: str) -> list[dict]:
    path = slurm_dir(output_dir) / "jobs.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return []


def task_states(job_id: str, tasks: int) -> dict[int, str]:
    """Each array task's state: squeue's while the controller remembers the task, sacct's where accounting runs,
    else `ended`."""
    if (
        shutil.which("squeue") is None
    ):  # `hpo status` on a machine outside the cluster: the tasks cannot be asked
        return dict.fromkeys(range(tasks), UNKNOWN)
    states = _squeue_states(job_id)
    missing = [task for task in range(tasks) if task not in states]
    if missing:
        states |= {task: state for task, state in _sacct_states(job_id).items() if task in missing}
    return {task: states.get(task, ENDED) for task in range(tasks)}


def _squeue_states(job_id: str) -> dict[int, str]:
    # -r: one line per array task (pending ones too); -t all: recently ended ones while slurmctld keeps them.
    done = _call(["squeue", "-h", "-r", "-t", "all", "-j", job_id, "-o", "%i %T"])
    if done.returncode != 0:  # "Invalid job id": the whole job has left the controller's memory
        return {}
    return _parse_task_lines(done.stdout, job_id)


def _sacct_states(job_id: str) -> dict[int, str]:
    if shutil.which("sacct") is None:
        return {}
    done = _call(["sacct", "-n", "-P", "-X", "-j", job_id, "-o", "JobID,State"])
    if done.returncode != 0:  # no accounting storage on this cluster
        return {}
    return _parse_task_lines(done.stdout.replace("|", " "), job_id)


def _parse_task_lines(text: str, job_id: str) -> dict[int, str]:
    """`123_4 RUNNING` lines -> {4: "RUNNING"}; a pending range (`123_[5-7]`) is left out (squeue -r expands it)."""
    states: dict[int, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2 or not parts[0].startswith(f"{job_id}_"):
            continue
        task = parts[0].split("_", 1)[1]
        if task.isdigit():
            states[int(task)] = parts[1].split()[0].rstrip("+")  # sacct: "CANCELLED by 0" -> CANCELLED
    return states


def active_jobs(output_dir: str) -> list[str]:
    """The recorded jobs with a task not ended yet."""
    return [
        job["job_id"]
        for job in recorded_jobs(output_dir)
        if any(state in ACTIVE_STATES for state in task_states(job["job_id"], job["tasks"]).values())
    ]


def cancel(job_ids: Sequence[str]) -> None:
    """scancel: SLURM sends SIGTERM to every process of each task; running trials save and are queued again."""
    if not job_ids:
        return
    done = _call(["scancel", *job_ids])
    if done.returncode != 0:
        raise HpoError(f"scancel {' '.join(job_ids)} failed: {_last_line(done.stderr)}")


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"
