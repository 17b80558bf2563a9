"""Trials that did not end by themselves (crashed, interrupted, stale): fail them and queue their parameters again.

The retry is an Optuna WAITING trial with the same parameters and these user attributes (names the retention rules and
the tracking read too): `requeued_from_trial` (the trial it continues), `retry_count`, `resume_from` (the newest complete
checkpoint of that trial, or the one it had itself resumed from). The failed trial gets `requeued: true`, so it does not
count toward n_trials twice, and `error`. Interrupts do not use up `resources.max_retries`; crashes do.

Only the process that moves the trial from RUNNING to FAIL queues the retry, so two processes noticing the same crash
(a worker and a stale-heartbeat check) never queue it twice.

Stale trials are found two ways. Heartbeats (`fail_stale_trials`) find a dead worker on any machine, after its grace
period. When `hpo run` starts it can tell at once for its own host (`requeue_stale_trials`): each trial records the
host, pid and pid start time of the process that runs it (`process_identity`), and a scheduler's worker records itself
as `worker: host:pid`; a RUNNING trial whose owner is gone (or whose pid now belongs to another process, or is a zombie)
is failed and queued again, so the retry resumes from its newest checkpoint.
"""

from __future__ import annotations

import datetime
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpo.spec import StudySpec
from hpo.storage import outage, remote, study_db
from hpo.storage.database import claim_lock
from hpo.storage.run_dirs import trial_run_dir
from hpo.storage.study_db import stale_trial_ids, storage_of

logger = logging.getLogger(__name__)
# What a retry inherits from the trial it continues: one queued to run alone after running out of GPU memory beside
# others (hpo.scheduling.gpu_gate) still runs alone when that retry is interrupted or crashes in turn.
CARRIED_ATTRS = ("oom_retry",)


@dataclass
class RetryPolicy:
    max_retries: int | None
    output_dir: str

    @classmethod
    def of(cls, spec: StudySpec) -> RetryPolicy:
        return cls(spec.resources.max_retries, str(spec.output_dir))

    def allows(self, trial: FrozenTrial, counts_as_retry: bool) -> bool:
        if not counts_as_retry:
            return True
        return self.max_retries is None or int(trial.user_attrs.get("retry_count", 0)) < self.max_retries


# ---- who runs a trial -------------------------------------------------------------------------------------------
def process_identity(pid: int | None = None) -> dict[str, Any]:
    """Who runs a trial (this process, or `pid` on this host): enough to tell later whether that process still exists
    (pid plus its start time)."""
    pid = os.getpid() if pid is None else pid
    return {"host": socket.gethostname(), "pid": pid, "pid_started": process_start_time(pid)}


def process_start_time(pid: int) -> int | None:
    """The kernel's start time of a process (clock ticks since boot), so a reused pid is not mistaken for ours."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


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


# ---- failing and queueing again -----------------------------------------------------------------------------------
def resume_point(trial: FrozenTrial, output_dir: str) -> str | None:
    """The newest complete checkpoint of the trial, else the checkpoint it had itself resumed from. With a URL output
    folder, the newest complete one in the object store: whichever machine runs the retry fetches it from there."""
    found = remote.latest(trial_run_dir(trial, output_dir), output_dir)
    if found is not None:
        return str(found)
    previous = trial.user_attrs.get("resume_from")
    return (
        str(remote.localize(previous, output_dir))
        if previous and remote.exists(previous, output_dir)
        else None
    )


def fail_running_trial(
    study: optuna.Study,
    trial_id: int,
    reason: str,
    policy: RetryPolicy,
    *,
    counts_as_retry: bool,
    extra_attrs: dict[str, Any] | None = None,
    retry_attrs: dict[str, Any] | None = None,
) -> int | None:
    """Mark a RUNNING trial FAIL with `reason` and queue a retry (with `retry_attrs` among its user attributes). Returns the failed trial's number when a retry was
    queued, else None (retries used up, or another process ended the trial first).

    Optuna freezes a finished trial's attributes, so they are written first, then the state changes; only the process
    whose state change succeeds queues the retry."""
    storage = storage_of(study)  # the trial object may live in another process: go by id
    trial = storage.get_trial(trial_id)
    allowed = policy.allows(trial, counts_as_retry)
    error = reason if allowed else f"{reason}; not retried: resources.max_retries = {policy.max_retries} used"
    try:
        for key, value in {**(extra_attrs or {}), "error": error, "requeued": allowed}.items():
            storage.set_trial_user_attr(trial_id, key, value)
        if not storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
            return None
    except optuna.exceptions.UpdateFinishedTrialError:
        return None  # someone else ended it first, and queued its retry
    return requeue(
        study,
        storage.get_trial(trial_id),
        reason,
        policy,
        counts_as_retry=counts_as_retry,
        retry_attrs=retry_attrs,
    )


def requeue(
    study: optuna.Study,
    trial: FrozenTrial,
    reason: str,
    policy: RetryPolicy,
    *,
    counts_as_retry: bool,
    retry_attrs: dict[str, Any] | None = None,
) -> int | None:
    """Queue again the parameters of a trial this process has just failed (its `requeued` attribute says whether
    it may be). Returns its number, or None when the retry budget is spent."""
    if not trial.user_attrs.get("requeued"):
        return None
    retries = int(trial.user_attrs.get("retry_count", 0)) + (1 if counts_as_retry else 0)
    attrs: dict[str, Any] = {
        "requeued_from_trial": trial.number,
        # the chain's first attempt: a tracker's run (TensorBoard folder, MLflow run) is continued, not started again
        "retry_root": trial.user_attrs.get("retry_root", trial.number),
        "retry_count": retries,
        "retry_reason": reason,
        **{name: trial.user_attrs[name] for name in CARRIED_ATTRS if name in trial.user_attrs},
        **(retry_attrs or {}),
    }
    checkpoint = resume_point(trial, policy.output_dir)
    if checkpoint:
        attrs["resume_from"] = checkpoint
    params = dict(trial.params) or dict(trial.system_attrs.get("fixed_params", {}))
    if not outage.ride(lambda: _enqueue_once(study, trial.number, params, attrs, policy), "queue a retry"):
        return None
    logger.info(
        "trial %d: %s; queued again (resume from %s)", trial.number, reason, checkpoint or "the start"
    )
    return trial.number


def _enqueue_once(
    study: optuna.Study, number: int, params: dict[str, Any], attrs: dict[str, Any], policy: RetryPolicy
) -> bool:
    """Queue the retry of trial `number` unless one exists: the check and the enqueue under the claim lock, so two
    processes that both failed or swept the trial (a worker stopped between the two steps of `fail_running_trial`
    wakes as another's `requeue_lost_retries` queues it: chaos seed 989430) queue one retry between them. Checked
    last, after the object store was listed for the resume point, which is long enough for a SIGSTOP to land in."""
    with claim_lock(storage_of(study), study.study_name, Path(policy.output_dir)):
        if retry_queued(study, number):
            return False
        study.enqueue_trial(params, user_attrs=attrs)
        return True


def continued_trials(trials: list[FrozenTrial]) -> set[int]:
    """The numbers of the trials a retry continues (whose retry has been queued)."""
    return {t.user_attrs["requeued_from_trial"] for t in trials if "requeued_from_trial" in t.user_attrs}


def retry_queued(study: optuna.Study, number: int) -> bool:
    """Whether a retry of trial `number` exists already. A process stopped (SIGSTOP, a frozen VM) between failing its
    trial and queueing the retry wakes after another worker's `requeue_lost_retries` queued it: a second retry would
    wait for ever once the first had run the configuration (tests/chaos seed 989430). The storage reads trials other
    processes created since this one last looked."""
    return number in continued_trials(study.get_trials(deepcopy=False))


def fail_stale_trials(study: optuna.Study, policy: RetryPolicy) -> list[int]:
    """Fail the trials whose heartbeat stopped for longer than the grace period (their worker died, on any machine)
    and queue them again. Returns the numbers of the trials queued again.

    Optuna's own `fail_stale_trials` fails them before its callback runs, when their attributes can no longer be
    written; this does the same steps in the order `fail_running_trial` needs."""
    requeued = []
    for stale_id in stale_trial_ids(study):
        worker = storage_of(study).get_trial(stale_id).user_attrs.get("worker", "?")
        reason = f"crashed: no heartbeat from worker {worker} within the grace period"
        number = fail_running_trial(
            study, stale_id, reason, policy, counts_as_retry=True, extra_attrs={"crashed": True}
        )
        if number is not None:
            requeued.append(number)
    return requeued


def fail_unbeaten_trials(study: optuna.Study, policy: RetryPolicy) -> list[int]:
    """Under the claim lock: fail and queue again the RUNNING trials whose claimer died before their first heartbeat
    (Optuna's stale check never sees them; with n_trials used up the study then waited on them for ever). A trial
    with a process of its own (`hpo run --in-process` records its pid, not heartbeats) is `owner_gone`'s to judge.
    Returns the numbers of the trials queued again."""
    requeued = []
    storage = storage_of(study)
    for unbeaten_id in study_db.unbeaten_trial_ids(study):
        if "pid" in storage.get_trial(unbeaten_id).user_attrs:
            continue
        reason = "crashed: its worker ended before the trial's first heartbeat"
        number = fail_running_trial(
            study, unbeaten_id, reason, policy, counts_as_retry=False, extra_attrs={"crashed": True}
        )
        if number is not None:
            requeued.append(number)
    return requeued


def retry_pending(study: optuna.Study) -> bool:
    """Whether a trial failed as `requeued` still waits for its retry: its failing process queues it a moment later, or
    `requeue_lost_retries` after the grace period (that process was killed in between). A worker with nothing else to
    claim waits for it rather than leave: the run's n_trials counts it, so leaving ends the run with the configuration
    unfinished (a second Ctrl-C between the two steps, tests/hpo/scheduling/test_scheduler_crashes.py). Never without
    heartbeats: then nothing would queue it."""
    if study_db.heartbeat_grace(study) is None:
        return False
    trials = study.get_trials(deepcopy=False)
    continued = continued_trials(trials)
    return any(
        t.state == TrialState.FAIL and t.user_attrs.get("requeued") and t.number not in continued
        for t in trials
    )


def requeue_lost_retries(study: optuna.Study, policy: RetryPolicy) -> list[int]:
    """Under the claim lock: queue the retry of each trial failed as `requeued` whose retry never came (its process,
    between the two steps of `fail_running_trial`, was killed: the configuration was lost; tests/chaos/campaign.py seed 37470,
    a whole-tree kill). Only a failure older than the heartbeat grace period: the process that failed it a moment ago
    is still about to queue it. Returns the numbers of the trials queued again."""
    grace = study_db.heartbeat_grace(study)
    if grace is None:
        return []
    trials = study.get_trials(deepcopy=False)
    continued = continued_trials(trials)
    now = datetime.datetime.now()  # as Optuna stamps datetime_complete: this client's local time
    requeued = []
    for trial in trials:
        ended = trial.datetime_complete
        if (
            trial.state != TrialState.FAIL
            or not trial.user_attrs.get("requeued")
            or trial.number in continued
            or ended is None
            or (now - ended).total_seconds() <= grace
        ):
            continue
        attrs = trial.user_attrs
        counted = not (
            attrs.get("interrupted") or attrs.get("oom_shared_with")
        )  # as the failing process counted it
        reason = str(attrs.get("error") or "queued again")
        if requeue(study, trial, reason, policy, counts_as_retry=counted) is not None:
            requeued.append(trial.number)
    return requeued


def requeue_stale_trials(study: optuna.Study, spec: StudySpec) -> list[int]:
    """Fail the RUNNING trials of this host whose process ended, and queue them again. Returns their numbers."""
    policy = RetryPolicy.of(spec)
    failed: list[int] = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if owner_gone(trial):
            owner = (
                trial.user_attrs.get("worker")
                or f"{trial.user_attrs.get('host')}:{trial.user_attrs.get('pid')}"
            )
            reason = f"crashed: its process {owner} ended while the trial was running"
            fail_running_trial(
                study,
                study_db.trial_id(trial),
                reason,
                policy,
                counts_as_retry=True,
                extra_attrs={"crashed": True},
            )
            failed.append(trial.number)
    return failed
