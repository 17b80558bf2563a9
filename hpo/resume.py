"""Resuming a study: trials left RUNNING by a process that no longer exists are failed and queued again.

Each trial records the host, pid and pid start time of the process that runs it (`hpo.trial.process_identity`). On this
host, a RUNNING trial whose process is gone (or whose pid now belongs to another process, or is a zombie) is stale: it
is marked FAIL with the reason, and its parameters are enqueued again, with the path of its newest checkpoint so that the
retry can continue from it. Trials of other hosts are left to the storage's heartbeats (`hpo.storage`).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpo.trial import process_start_time

DEFAULT_MAX_RETRIES = 3


def process_alive(pid: int, started: int | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return True  # no /proc: trust kill(0)
    if stat[0] in ("Z", "X"):
        return False
    return started is None or process_start_time(pid) == started


def is_stale(trial: FrozenTrial, host: str | None = None) -> bool:
    attrs = trial.user_attrs
    if trial.state != TrialState.RUNNING or attrs.get("host") != (host or socket.gethostname()):
        return False
    pid = attrs.get("pid")
    return pid is not None and not process_alive(int(pid), attrs.get("pid_started"))


def newest_checkpoint(run_dir: str | None) -> str | None:
    from trainer.checkpoint import latest_checkpoint

    if not run_dir or not Path(run_dir).is_dir():
        return None
    found = latest_checkpoint(run_dir)  # complete checkpoints only
    return str(found) if found else None


def requeue_stale_trials(study: optuna.Study, max_retries: int | None = DEFAULT_MAX_RETRIES) -> list[int]:
    """Fail the stale RUNNING trials of this host and enqueue their parameters again. Returns the failed numbers."""
    failed: list[int] = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if is_stale(trial):
            _fail_and_requeue(study, trial, max_retries)
            failed.append(trial.number)
    return failed


def _fail_and_requeue(study: optuna.Study, trial: FrozenTrial, max_retries: int | None) -> None:
    attrs = trial.user_attrs
    retries = int(attrs.get("retry_count", 0))
    requeue = max_retries is None or retries < max_retries
    error = f"stale: process {attrs.get('pid')} on {attrs.get('host')} ended while the trial was running"
    storage = study._storage  # noqa: SLF001 - Optuna has no public API for attributes of another process's trial
    storage.set_trial_user_attr(trial._trial_id, "error", error)  # noqa: SLF001
    storage.set_trial_user_attr(trial._trial_id, "requeued", requeue)  # noqa: SLF001
    study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)
    if requeue:
        retry_attrs: dict[str, Any] = {"requeued_from_trial": trial.number, "retry_count": retries + 1}
        checkpoint = newest_checkpoint(attrs.get("run_dir"))
        if checkpoint:
            retry_attrs["resume_from"] = checkpoint
        study.enqueue_trial(dict(trial.params), user_attrs=retry_attrs)
