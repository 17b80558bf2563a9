"""A PBT study whose time limit passed: the members paused at an interval end COMPLETE there.

In lockstep, about half the population is paused at any moment (population > slots), and the best member is as
likely paused as training. Left WAITING, no trial of the study would be complete when `hpo run --timeout` ends, so
there would be no best trial to show or export. Each paused member ends with the score of the checkpoint it holds
(its own score at that interval, or, when that interval's decision copied another member's checkpoint into its
folder, that member's score there), and that checkpoint becomes its best: what export ships is what was scored. As
Ray Tune's PBT does when its time budget ends, a member is judged by its last result.
"""

from __future__ import annotations

import logging
import math

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpo.scheduling.pbt import population
from hpo.spec import StudySpec
from hpo.storage import pause
from hpo.storage.lineage import member_scores, members, segments
from hpo.storage.study_db import storage_of, trial_id
from hpo.tracking.events import record_event
from hpo.tracking.store import trial_run_id

logger = logging.getLogger(__name__)


def end_paused_members(study: optuna.Study, spec: StudySpec) -> list[tuple[FrozenTrial, int, float | None]]:
    """End every paused member COMPLETE at its interval; returns (trial, step, value) of each ended. Call under the
    claim lock, once no worker will claim again (the time limit passed). The experiment store hears of each first: a
    worker killed between the two writes would otherwise leave the store's run "paused" for a finished trial."""
    _, latest = population(study)
    chains = members(study.get_trials(deepcopy=False))
    ended = []
    for newest in latest.values():
        info = pause.pause_info(newest)
        checkpoint = pause.checkpoint_of(newest)
        if not info or checkpoint is None:
            continue
        step = int(info["step"])
        value = held_score(newest, step, chains)
        if value is None or not math.isfinite(value):
            state, value = TrialState.PRUNED, None  # an unscored member cannot be the best: as a pruned one
        else:
            state = TrialState.COMPLETE
        storage = storage_of(study)
        storage.set_trial_user_attr(trial_id(newest), "best_checkpoint", str(checkpoint))
        storage.set_trial_user_attr(trial_id(newest), "best_step", step)
        storage.set_trial_user_attr(trial_id(newest), "ended_at_time_up", step)
        kind = "completed" if state == TrialState.COMPLETE else "pruned"
        message = f"time is up: ended at step {step} with the score of the checkpoint it holds ({value})"
        record_event(spec, trial_run_id(study.study_name, newest.number), kind, message, {"step": step})
        if pause.end_paused_trial(study, trial_id(newest), state, value):
            ended.append((newest, step, value))
    return ended


def held_score(trial: FrozenTrial, step: int, chains: dict[int, list[FrozenTrial]]) -> float | None:
    """The score of the checkpoint a member paused at `step` holds: the source's at `step` when that interval's
    decision copied the source's checkpoint over its own, else its own."""
    copied = [s for s in segments(trial) if s.step == step and s.source is not None]
    if copied:
        return member_scores(chains.get(int(copied[-1].source), [])).get(step)
    value = pause.pause_info(trial).get("value")
    return None if value is None else float(value)
