"""Paused trials in the study's database: the storage half of pause/resume, shared by every scheduler that pauses
trials and continues them later (ASHA promotions, population-based training).

A paused trial is an Optuna trial moved back from RUNNING to WAITING, with a system attribute `hpo:paused` that says
where it stopped: `{"step": global step, "checkpoint": folder to resume from, "value": objective there, "at": unix
time}`. WAITING because that is what it does, and because a WAITING trial has no heartbeat to go stale (the stale
sweep looks at RUNNING trials only) while it stays writable (Optuna refuses to change finished trials). Plain
`study.ask()` would hand a paused trial out like a queued retry, so workers of a study that pauses trials take queued
trials with `study_db.ask_queued` (which skips paused ones) and resume paused ones only through `resume_trial`.

Every value a trial reports at a pause point (or passes without pausing) is kept in `hpo:boundaries`
(`{"<step>": value}`), and each time a trial is resumed its step is appended to `hpo:resumed_at`, so any process can
rebuild the trial's path. All of it lives in the database, so a SIGKILL of the scheduler loses nothing: the next
`hpo run` (or an `hpo worker` on another machine sharing the checkpoint path) sees the same paused trials.

Concurrency: `resume_trial` moves WAITING -> RUNNING, which Optuna's storage does atomically and refuses when another
process got there first, so a trial is never resumed twice even without a lock; callers still decide under
`hpo.storage.database.claim_lock`, so the decision and the resume are one step for every worker.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpo.storage.boundaries import BOUNDARIES
from hpo.storage.boundaries import (
    boundaries as boundaries,
)  # re-exported: promotion reads it as pause.boundaries
from hpo.storage.study_db import PAUSED_ATTR, storage_of, update_trial

PAUSED = PAUSED_ATTR
RESUMED_AT = "hpo:resumed_at"


def is_paused(trial: FrozenTrial) -> bool:
    return trial.state == TrialState.WAITING and bool(trial.system_attrs.get(PAUSED))


def is_queued_retry(trial: FrozenTrial) -> bool:
    """A crashed or interrupted trial's retry, queued (WAITING) and not paused."""
    return (
        trial.state == TrialState.WAITING
        and not trial.system_attrs.get(PAUSED)
        and "requeued_from_trial" in trial.user_attrs
    )


def pause_info(trial: FrozenTrial) -> dict[str, Any]:
    """Where a paused trial stopped (empty for a trial that is not paused)."""
    info = trial.system_attrs.get(PAUSED)
    return dict(info) if is_paused(trial) and isinstance(info, dict) else {}


def paused_trials(study: optuna.Study) -> list[FrozenTrial]:
    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)) if is_paused(t)]


def record_boundary(study: optuna.Study, trial_id: int, step: int, value: float) -> None:
    """Keep the value a trial reported at a pause point (it may pause there or continue)."""
    storage = storage_of(study)
    known = dict(storage.get_trial(trial_id).system_attrs.get(BOUNDARIES) or {})
    known[str(step)] = value
    storage.set_trial_system_attr(trial_id, BOUNDARIES, known)


def pause_trial(
    study: optuna.Study, trial_id: int, *, step: int, checkpoint: str, value: float | None
) -> bool:
    """Move a RUNNING trial that stopped at `step` and saved `checkpoint` to paused (WAITING). False when the trial
    is no longer RUNNING (another process failed it meanwhile)."""
    info = {"step": step, "checkpoint": checkpoint, "value": value, "at": time.time()}
    return update_trial(
        study, trial_id, only_if=TrialState.RUNNING, state=TrialState.WAITING, system_attrs={PAUSED: info}
    )


def park_retry(
    study: optuna.Study, trial_id: int, *, step: int, checkpoint: str, value: float | None
) -> bool:
    """Make a queued retry (WAITING, not paused) a paused trial at `step`, as if its predecessor had paused there: the
    predecessor saved `checkpoint` and reported `value` at a pause point, then died before it paused. Parked, the
    retry is judged at that point like any paused trial (ASHA ranks it in its rung, PBT decides its interval) instead
    of training past it unjudged. Call under the claim lock (no claimer may pop the retry meanwhile). False when
    the trial is no longer a queued retry."""
    storage = storage_of(study)
    trial = storage.get_trial(trial_id)
    if trial.state != TrialState.WAITING or trial.system_attrs.get(PAUSED):
        return False
    info = {"step": step, "checkpoint": checkpoint, "value": value, "at": time.time(), "parked": True}
    storage.set_trial_system_attr(trial_id, PAUSED, info)
    return True


def checkpoint_step(checkpoint: str | Path) -> int | None:
    """The global step of a `checkpoint-<step>` folder, None for another name."""
    _, _, step = Path(checkpoint).name.rpartition("-")
    return int(step) if step.isdigit() else None


def resume_trial(
    study: optuna.Study, trial_id: int, owner_attrs: dict[str, Any] | None = None
) -> optuna.Trial | None:
    """Take a paused trial to run it on: RUNNING again, its heartbeat fresh, `owner_attrs` (who runs it) written
    first. Returns the trial, or None when another process resumed or ended it first. The checkpoint to resume from
    is `pause_info(...)["checkpoint"]`, read before this call."""
    trial = storage_of(study).get_trial(trial_id)
    if not is_paused(trial):
        return None
    resumed = [*(trial.system_attrs.get(RESUMED_AT) or []), pause_info(trial).get("step")]
    # All at once, the heartbeat with them: its last beat is from before the pause, and a stale sweep between
    # "RUNNING" and a first beat would fail the trial just resumed.
    if not update_trial(
        study,
        trial_id,
        only_if=TrialState.WAITING,
        state=TrialState.RUNNING,
        user_attrs=owner_attrs,
        system_attrs={RESUMED_AT: resumed, PAUSED: None},
        heartbeat=True,
    ):
        return None
    return optuna.Trial(study, trial_id)


def end_paused_trial(study: optuna.Study, trial_id: int, state: TrialState, value: float | None) -> bool:
    """End a paused trial for good (PRUNED at its pause point with its value, COMPLETE there with it, or FAIL). False
    when another process resumed or ended it first."""
    storage = storage_of(study)
    trial = storage.get_trial(trial_id)
    if not is_paused(trial):
        return False
    values = [value] if value is not None and state != TrialState.FAIL else None
    try:
        if state == TrialState.PRUNED:
            storage.set_trial_user_attr(trial_id, "pruned_step", pause_info(trial).get("step"))
        return storage.set_trial_state_values(trial_id, state=state, values=values)
    except optuna.exceptions.UpdateFinishedTrialError:
        return False


def checkpoint_of(trial: FrozenTrial) -> Path | None:
    path = pause_info(trial).get("checkpoint")
    return Path(path) if path else None
