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
    """Mark a RUNNING trial FAIL with `reason` and queue a retry. Returns the retry's trial number slot, or None."""
    storage = study._storage  # noqa: SLF001 - the trial object may live in another process
    for key, value in {"error": reason, **(extra_attrs or {})}.items():
        storage.set_trial_user_attr(trial_id, key, value)
    try:
        if not storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
            return None
    except optuna.exceptions.UpdateFinishedTrialError:
        return None  # someone else ended it first, and queued its retry
    return requeue(study, storage.get_trial(trial_id), reason, policy, counts_as_retry=counts_as_retry)


def requeue(
    study: optuna.Study, trial: FrozenTrial, reason: str, policy: RetryPolicy, *, counts_as_retry: bool
) -> int | None:
    """Queue the parameters of a trial that this process has just failed. Returns its number, or None when the
    retry budget is spent."""
    storage = study._storage  # noqa: SLF001
    allowed = policy.allows(trial, counts_as_retry)
    storage.set_trial_user_attr(trial._trial_id, "requeued", allowed)  # noqa: SLF001
    if not allowed:
        storage.set_trial_user_attr(
            trial._trial_id,  # noqa: SLF001
            "error",
            f"{reason}; not retried: resources.max_retries = {policy.max_retries} retries used",
        )
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


class StaleTrialRequeuer:
    """Optuna's heartbeat-stale callback: a trial whose heartbeat stopped (its worker died) was just failed by
    `optuna.storages.fail_stale_trials`; queue it again to resume from its checkpoint."""

    def __init__(self, policy: RetryPolicy, on_requeue: Any = None) -> None:
        self.policy = policy
        self.on_requeue = on_requeue

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        worker = trial.user_attrs.get("worker", "?")
        reason = f"crashed: no heartbeat from worker {worker} within the grace period"
        study._storage.set_trial_user_attr(trial._trial_id, "error", reason)  # noqa: SLF001
        study._storage.set_trial_user_attr(trial._trial_id, "crashed", True)  # noqa: SLF001
        requeue(study, trial, reason, self.policy, counts_as_retry=True)
        if self.on_requeue is not None:
            self.on_requeue(trial, reason)
