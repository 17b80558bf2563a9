"""Resuming a study: trials left RUNNING by a process of this host that no longer exists are failed and queued again.

Heartbeats (`hpo.storage`, `hpo.requeue.StaleTrialRequeuer`) find a dead worker only after its grace period, and only
for trials that had a heartbeat. When `hpo run` starts, it can tell at once: each trial records the host, pid and pid
start time of the process that runs it (`hpo.trial.process_identity`), and a scheduler's worker records itself as
`worker: host:pid`. On this host, a RUNNING trial whose owner is gone (or whose pid now belongs to another process, or is
a zombie) is failed and queued again through `hpo.requeue`, so the retry resumes from its newest checkpoint.
Trials of other hosts are left to their heartbeats.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpo.requeue import RetryPolicy, fail_running_trial
from hpo.trial import process_start_time


def process_alive(pid: int, started: int | None = None) -> bool:
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


def owner_gone(trial: FrozenTrial, host: str | None = None) -> bool:
    """Whether the process that owns this RUNNING trial on this host has ended. The worker, when there is one, owns
    it (its trial process may have just exited while the worker records the outcome); else the trial's own process."""
    host = host or socket.gethostname()
    attrs = trial.user_attrs
    worker = str(attrs.get("worker") or "")
    if worker:
        worker_host, _, worker_pid = worker.rpartition(":")
        return worker_host == host and worker_pid.isdigit() and not process_alive(int(worker_pid))
    if attrs.get("host") != host or attrs.get("pid") is None:
        return False
    return not process_alive(int(attrs["pid"]), attrs.get("pid_started"))


def requeue_stale_trials(study: optuna.Study, spec: Any) -> list[int]:
    """Fail the RUNNING trials of this host whose process ended, and queue them again. Returns their numbers."""
    policy = RetryPolicy(getattr(spec.resources, "max_retries", None), str(spec.output_dir))
    failed: list[int] = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if owner_gone(trial):
            owner = (
                trial.user_attrs.get("worker")
                or f"{trial.user_attrs.get('host')}:{trial.user_attrs.get('pid')}"
            )
            reason = f"crashed: its process {owner} ended while the trial was running"
            fail_running_trial(
                study, trial._trial_id, reason, policy, counts_as_retry=True, extra_attrs={"crashed": True}
            )
            failed.append(trial.number)
    return failed
