"""Fail a trial that did not end by itself (crashed, interrupted, stale) and queue its parameters again.

The retry is an Optuna WAITING trial with the same parameters and these user attributes (the names `hpo.resume` and
`hpo.disk` use too): `requeued_from_trial` (the trial it continues), `retry_count`, `resume_from` (the newest complete
checkpoint of that trial, or the one it had itself resumed from). The failed trial gets `requeued: true`, so it does not
count toward n_trials twice, and `error`. Interrupts do not use up `resources.max_retries`; crashes do.

Only the process that moves the trial from RUNNING to FAIL queues the retry, so two processes noticing the same crash
(a worker and a stale-heartbeat check) never queue it twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

logger = logging.getLogger(__name__)


@dataclass
class RetryPolicy:
    max_retries: int | None
    output_dir: str

    def allows(self, trial: FrozenTrial, counts_as_retry: bool) -> bool:
        if not counts_as_retry:
            return True
        return self.max_retries is None or int(trial.user_attrs.get("retry_count", 0)) < self.max_retries


def resume_point(trial: FrozenTrial, output_dir: str) -> str | None:
    """The newest complete checkpoint of the trial, else the checkpoint it had itself resumed from."""
    from trainer.checkpoint import latest_checkpoint

    run_dir = Path(trial.user_attrs.get("run_dir") or Path(output_dir) / f"trial-{trial.number}")
    found = latest_checkpoint(run_dir) if run_dir.is_dir() else None
    if found is not None:
        return str(found)
    previous = trial.user_attrs.get("resume_from")
    return str(previous) if previous and Path(previous).is_dir() else None


def fail_running_trial(
    study: optuna.Study,
    trial_id: int,
    reason: str,
    policy: RetryPolicy,
    *,
    counts_as_retry: bool,
    extra_attrs: dict[str, Any] | None = None,
) -> int | None:
    """Mark a RUNNING trial FAIL with `reason` and queue a retry. Returns the failed trial's number when a retry was
    queued, else None (retries used up, or another process ended the trial first).

    Optuna freezes a finished trial's attributes, so they are written first, then the state changes; only the process
    whose state change succeeds queues the retry."""
    storage = study._storage  # noqa: SLF001 - the trial object may live in another process
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
    return requeue(study, storage.get_trial(trial_id), reason, policy, counts_as_retry=counts_as_retry)


def requeue(
    study: optuna.Study, trial: FrozenTrial, reason: str, policy: RetryPolicy, *, counts_as_retry: bool
) -> int | None:
    """Queue again the parameters of a trial this process has just failed (its `requeued` attribute says whether
    it may be). Returns its number, or None when the retry budget is spent."""
    if not trial.user_attrs.get("requeued"):
        return None
    retries = int(trial.user_attrs.get("retry_count", 0)) + (1 if counts_as_retry else 0)
    attrs: dict[str, Any] = {
        "requeued_from_trial": trial.number,
        "retry_count": retries,
        "retry_reason": reason,
    }
    checkpoint = resume_point(trial, policy.output_dir)
    if checkpoint:
        attrs["resume_from"] = checkpoint
    params = dict(trial.params) or dict(trial.system_attrs.get("fixed_params", {}))
    study.enqueue_trial(params, user_attrs=attrs)
    logger.info(
        "trial %d: %s; queued again (resume from %s)", trial.number, reason, checkpoint or "the start"
    )
    return trial.number


def fail_stale_trials(study: optuna.Study, policy: RetryPolicy) -> list[int]:
    """Fail the trials whose heartbeat stopped for longer than the grace period (their worker died, on any machine)
    and queue them again. Returns the numbers of the trials queued again.

    Optuna's own `fail_stale_trials` fails them before its callback runs, when their attributes can no longer be
    written; this does the same steps in the order `fail_running_trial` needs."""
    storage = study._storage  # noqa: SLF001
    backend = getattr(storage, "_backend", storage)
    if not hasattr(backend, "_get_stale_trial_ids") or backend.get_heartbeat_interval() is None:
        return []
    requeued = []
    for trial_id in backend._get_stale_trial_ids(study._study_id):  # noqa: SLF001
        worker = storage.get_trial(trial_id).user_attrs.get("worker", "?")
        reason = f"crashed: no heartbeat from worker {worker} within the grace period"
        number = fail_running_trial(
            study, trial_id, reason, policy, counts_as_retry=True, extra_attrs={"crashed": True}
        )
        if number is not None:
            requeued.append(number)
    return requeued
