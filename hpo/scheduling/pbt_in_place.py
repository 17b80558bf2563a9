"""A PBT member that reaches an interval trains on in place when its decision there lets it, as a promoted ASHA trial
does, instead of pausing, exiting and being restored in a new process.

    after the checkpoint at interval t is on disk (PauseCallback.after_save), in the member's process, rank 0:
        under claim_lock:
            mark the member waiting at t (WAITING): the population sees it as stopped there, its checkpoint in its
                own folder, exactly like a member paused there (hpo.scheduling.pbt.stopped_at)
            t's scores complete -> take t's decisions for every member stopped there: the very code a claim runs
                (hpo.scheduling.pbt_population.decide, seeded per member and step)
        decided at t (by itself, another member or a claim) -> not exploited: train on in place
                                                              exploited: pause (its folder holds the copy already;
                                                              a claim resumes it with the explored values)
        not decided, and every live member without a score at t is training now -> poll again: the slot is held,
            but no other work could use it (every other member waits for those scores)
        else pause as before: a slot must free for a member paused behind t or not started yet
    (read first, without the lock: a member short of t that waits for a slot -> pause at once, `slot_needed`)

Crash safety is the claim's: a member killed while waiting is RUNNING with WAITING set, so the population still sees
it stopped at t and decides it (copying into its folder if it is exploited); its retry resumes from the newest
checkpoint in that folder and adopts its lineage and decided intervals, or, undecided, is parked at t
(`park_undecided_retries`) and decided there.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpo.scheduling.pbt import WAITING, PbtPlan, population, take_decisions
from hpo.scheduling.pbt_population import Member, decide, steps_to_decide
from hpo.storage import outage
from hpo.storage.database import claim_lock
from hpo.storage.lineage import segments
from hpo.storage.retry import owner_gone
from hpo.storage.study_db import stale_trial_ids, storage_of, trial_id
from hpo.trial.callbacks import interrupt_requested
from hpo.trial.pause import AfterSave

logger = logging.getLogger(__name__)
POLL_S = 0.02  # while a partner trains the last steps before the interval (a step is milliseconds)


def in_place_after_save(study: optuna.Study, trial: optuna.Trial, plan: PbtPlan, lock_dir: Path) -> AfterSave:
    """`after_save(point)` for the member's PauseCallback: True to train on in place, False to pause."""

    def after_save(point: int) -> bool:
        try:
            return wait_for_verdict(study, trial, plan, lock_dir, point)
        except Exception as error:  # noqa: BLE001 - e.g. a database busy too long: pause, and a claim decides
            logger.warning("trial %d: pausing at step %d (%s)", trial.number, point, error)
            return False

    return after_save


def wait_for_verdict(
    study: optuna.Study, trial: optuna.Trial, plan: PbtPlan, lock_dir: Path, point: int
) -> bool:
    if slot_needed(study, plan, point):
        return False
    storage = storage_of(study)

    def look() -> (
        bool | None
    ):  # whole, from the lock: on PostgreSQL an outage frees it (hpo.storage.database)
        with claim_lock(storage, study.study_name, lock_dir):
            storage.set_trial_system_attr(trial_id(trial), WAITING, point)  # the same value again: harmless
            return judge(study, plan, trial.number, point)

    while not interrupt_requested():  # a stop asked: pause as before, the worker queues it to resume
        verdict = outage.ride(look, "judge a PBT interval")
        if verdict is not None:
            return verdict
        time.sleep(POLL_S)
    return False


def judge(study: optuna.Study, plan: PbtPlan, number: int, point: int) -> bool | None:
    """Call under the claim lock. True: decided at `point` and not exploited; False: pause; None: wait."""
    states, latest = population(study)
    if point in steps_to_decide(states, plan.scheduler.population):
        decisions = decide(states, point, plan.scheduler, plan.space, plan.maximize, plan.seed)
        # with an object store, the copies are fetched from it and uploaded (plan.output_dir names it)
        take_decisions(study, latest, decisions, plan.output_dir)
        states, latest = population(study)
    me = next((m for m in states if latest[m.number].number == number), None)
    if me is None:
        return False  # no longer its member's newest trial (failed and retried meanwhile): stop here
    if point in me.decided:
        return not exploited_at(latest[me.number], point)
    if len(states) < plan.scheduler.population:
        return False  # a member not started yet needs a slot
    return None if others_arrive_unaided(states, training_members(study, states, latest), point) else False


def slot_needed(study: optuna.Study, plan: PbtPlan, point: int) -> bool:
    """Whether a member short of `point` waits for a slot (not started, paused behind it, queued again): then this
    member pauses at once, as `judge` would tell it to, after one read instead of the claim lock and a write. With 8
    members on 2 slots that is most intervals of most members (bench/pause/costs.py pbt)."""
    states, latest = population(study)
    if len(states) < plan.scheduler.population:
        return True
    short = [m for m in states if not (m.dead or m.paused_at == point or point in m.decided)]
    if any(latest[m.number].state != TrialState.RUNNING for m in short):
        return True  # paused behind the interval, or queued again: no query for stale heartbeats needed
    return not others_arrive_unaided(states, training_members(study, states, latest), point)


def exploited_at(trial: FrozenTrial, step: int) -> bool:
    return any(s.step == step and s.source is not None for s in segments(trial))


def training_members(study: optuna.Study, states: list[Member], latest: dict[int, FrozenTrial]) -> set[int]:
    """Members whose newest trial is RUNNING with a process behind it: not one whose heartbeat stopped, nor one of this
    host whose worker has ended (killed with an earlier `hpo run`). Those are failed and queued again only by a claim,
    which a worker waiting here on its trial would never make."""
    stale = set(stale_trial_ids(study))
    return {
        m.number
        for m in states
        if latest[m.number].state == TrialState.RUNNING
        and latest[m.number]._trial_id not in stale  # noqa: SLF001
        and not owner_gone(latest[m.number])
    }


def others_arrive_unaided(states: list[Member], training: set[int], point: int) -> bool:
    """Every live member not yet stopped at `point` (nor decided there) is training now, so it gets there without a
    slot; one that waits for a slot (paused behind, queued again) would never come while the slots wait."""
    return all(m.dead or m.paused_at == point or point in m.decided or m.number in training for m in states)
