"""ASHA on the study's database: build the rung tables from the stored trials, and claim the next piece of work.

    under claim_lock (hpo.storage.database), one claimer at a time on every machine:
        trials = rung_table(study)             # each trial's values at the rungs it reached (hpo:boundaries), paused?
        park retries that continue from a rung their trial was never judged at: paused there (killed after the
            rung's save, before its pause), so they are ranked at that rung like any paused trial
        end paused trials that can never be promoted: PRUNED at their rung with its value; their checkpoints go
        a queued retry (a crashed trial continuing from its checkpoint) first
        else the ASHA rule (hpo.scheduling.asha.next_promotion): resume that paused trial from its checkpoint
        else, while n_trials allows, a new configuration (an `enqueue:` one first, else the sampler's)
        else nothing (the worker waits while trials run, and leaves when none does)

A trial reaching a rung records its value there from its own process (`rung_decider`), and, when the rule would
promote it this very moment if it paused (it is the best promotable trial of the highest rung that has one), it goes
on training in place: the same decision a free slot would take, without saving, exiting and restoring. Otherwise it
pauses (hpo.trial.pause, hpo.storage.pause) and its slot takes the next piece of work.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from collections.abc import Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpo.scheduling.asha import RungTrial, hopeless, next_promotion, values_by_rung
from hpo.scheduling.rank_gate import RankGate
from hpo.spec import StudySpec
from hpo.spec.scheduler import RankGateSpec
from hpo.storage import outage, pause, remote
from hpo.storage.attempts import ancestors
from hpo.storage.database import claim_lock
from hpo.storage.retention import checkpoints_in
from hpo.storage.retry import continued_trials
from hpo.storage.study_db import (
    ask_new,
    ask_queued,
    record_heartbeat,
    remaining_trials,
    storage_of,
    trial_id,
)
from hpo.tracking.events import record_event, store_location
from hpo.tracking.run_info import RunInfo, origin_attrs
from hpo.tracking.store import trial_run_id
from hpo.tracking.store_callback import record_origin
from hpo.trial.pause import PauseCallback
from trainer.checkpoint_names import STATE_FILE

logger = logging.getLogger(__name__)
IN_PLACE = "hpo:in_place"  # system attribute: the rung points a trial was promoted from in place (no pause)


@dataclass(frozen=True)
class AshaPlan:
    levels: tuple[int, ...]  # pause points: global steps, or epochs
    eta: int
    maximize: bool
    resource: str
    metric: str
    in_place: bool = True
    underfilled: bool = True  # the best trial of a rung with fewer than eta trials goes on (asha.top_size)
    gate: RankGate | None = None  # a rung judges only once its values rank the final scores (rank_gate.py)
    store: str | None = None  # the experiment store, where a trial ended at its rung records "pruned"
    output_dir: str | None = None  # checkpoints there, and in the object store behind it (hpo.storage.remote)

    @classmethod
    def of(cls, spec: StudySpec) -> AshaPlan | None:
        scheduler = spec.study.scheduler
        if scheduler is None or scheduler.type != "asha" or spec.stops_at_rungs():
            return None
        assert scheduler.reduction_factor is not None  # settled
        return cls(
            levels=tuple(scheduler.promotion_levels()),
            eta=scheduler.reduction_factor,
            maximize=(spec.study.directions or ["minimize"])[0] == "maximize",
            resource=scheduler.resource,
            metric=(spec.study.metrics or ["eval_loss"])[0],
            in_place=scheduler.continue_in_place,
            underfilled=scheduler.promote_underfilled,
            gate=_gate(scheduler.rank_gate),
            store=store_location(spec),
            output_dir=spec.output_dir,
        )


def _gate(section: RankGateSpec | None) -> RankGate | None:
    if section is None or not section.enabled:
        return None
    return RankGate(section.min_pairs, section.min_correlation)


def gate_pairs(trials: list[FrozenTrial], point: int) -> list[tuple[float, float]]:
    """(value at the rung point, final score) of every COMPLETE trial that reported at `point`: what the rank gate
    judges the rung by. A retry's own boundaries only (an inherited value was its predecessor's report)."""
    pairs = []
    for trial in trials:
        if trial.state != TrialState.COMPLETE or trial.value is None or not math.isfinite(trial.value):
            continue
        value = pause.boundaries(trial).get(point)
        if value is not None and math.isfinite(value):
            pairs.append((value, trial.value))
    return pairs


def rung_trial(trial: FrozenTrial, plan: AshaPlan, inherited: dict[int, float] | None = None) -> RungTrial:
    """`inherited`: the rung values of the trials a retry continues (a crashed trial queued again from its checkpoint
    is a new Optuna trial; its path through the rungs is its predecessors' path)."""
    values = values_by_rung({**(inherited or {}), **pause.boundaries(trial)}, list(plan.levels))
    paused = pause.is_paused(trial)
    running = trial.state == TrialState.RUNNING
    top = max(values, default=-1)
    # Promoted from every rung it passed; from its highest one too unless it is paused there or ended there.
    stopped_at_top = paused or trial.state in (TrialState.PRUNED, TrialState.FAIL)
    promoted = {k for k in values if k < top or (k == top and not stopped_at_top)}
    return RungTrial(trial.number, values, paused=paused, running=running, promoted=promoted)


def rung_table(study: optuna.Study, plan: AshaPlan) -> list[RungTrial]:
    """Every configuration once: a trial failed and queued again is represented by its retry (queued or running),
    which inherits its rung values."""
    trials = study.get_trials(deepcopy=False)
    by_number = {t.number: t for t in trials}
    continued = continued_trials(trials)
    table = []
    for trial in trials:
        queued = trial.state == TrialState.WAITING and not pause.is_paused(trial)
        if queued and "requeued_from_trial" not in trial.user_attrs:
            continue  # an enqueued configuration not started yet: n_trials still counts it as to come
        if trial.state == TrialState.FAIL and trial.user_attrs.get("requeued"):
            if trial.number in continued:
                continue  # its retry stands for it
            table.append(_retry_to_come(trial, plan, by_number))
            continue
        entry = rung_trial(trial, plan, _inherited(trial, by_number))
        entry.running = entry.running or queued  # a queued retry is alive: it will go on from its checkpoint
        table.append(entry)
    return table


def _retry_to_come(trial: FrozenTrial, plan: AshaPlan, by_number: dict[int, FrozenTrial]) -> RungTrial:
    """A trial failed as requeued whose retry is not queued yet (its process fails it, then queues the retry under the
    claim lock, which this claimer may hold): it stands for its retry, alive and past its rungs, as the retry will be.
    Left out, the rule judged a rung without it and pruned a paused trial the retry's value would have promoted
    (tests/chaos seed 160601: 6 configurations, eta 2, the third of the rung pruned in that window)."""
    entry = rung_trial(trial, plan, _inherited(trial, by_number))
    return RungTrial(trial.number, entry.values, paused=False, running=True, promoted=set(entry.values))


def _inherited(trial: FrozenTrial, by_number: dict[int, FrozenTrial]) -> dict[int, float]:
    values: dict[int, float] = {}
    for before in ancestors(trial, by_number):
        values = {**pause.boundaries(before), **values}  # a newer attempt's value at a point wins
    return values


# ---- claiming (under the claim lock) ---------------------------------------------------------------------------
def claim_work(
    study: optuna.Study, plan: AshaPlan, n_trials: int | None, owner: dict[str, Any]
) -> optuna.Trial | None:
    """The next trial for a free slot, or None. Call under `claim_lock`. A resumed trial carries `resume_from`."""
    park_unjudged_retries(study, plan)
    end_hopeless(study, plan, n_trials)
    remaining = remaining_trials(study, n_trials)
    if remaining is None or remaining > 0:
        retry = ask_queued(study, retries_only=True)  # work already promoted, continuing from its checkpoint
        if retry is not None:
            return retry
    promotion = next_promotion(
        rung_table(study, plan), len(plan.levels), plan.eta, plan.maximize, plan.underfilled
    )
    if promotion is not None:
        resumed = resume(study, promotion.number, owner)
        if resumed is not None:
            return resumed
    if remaining is None or remaining > 0:
        return ask_queued(study) or ask_new(study)  # `enqueue:` configurations first, then the sampler's
    return None


def resume(study: optuna.Study, number: int, owner: dict[str, Any]) -> optuna.Trial | None:
    frozen = _by_number(study, number)
    checkpoint = pause.checkpoint_of(frozen) if frozen is not None else None
    if frozen is None or checkpoint is None:
        return None
    step = pause.pause_info(frozen).get("step")
    attrs = {**owner, "resume_from": str(checkpoint), "promoted_at_step": step}
    return pause.resume_trial(study, trial_id(frozen), attrs)


def end_hopeless(
    study: optuna.Study, plan: AshaPlan, n_trials: int | None, *, time_up: bool = False
) -> list[int]:
    """End the paused trials ASHA can never promote: PRUNED with their rung value; their checkpoints are deleted.
    `time_up`: the run's time limit has passed, so no new configuration comes (as when n_trials is used up), even in a
    study without n_trials; the paused trials the rule would still promote stay paused for a later run."""
    remaining = 0 if time_up else remaining_trials(study, n_trials)
    trials = rung_table(study, plan)
    ended = []
    for out in hopeless(trials, plan.eta, plan.maximize, remaining, plan.underfilled):
        frozen = _by_number(study, out.number)
        if frozen is None:
            continue
        checkpoint = pause.checkpoint_of(frozen)
        value = out.values.get(out.rung)
        # The store first: a worker killed between the two left the store's run "paused" for a PRUNED trial
        # (tests/chaos/campaign.py seed 714328). Under the claim lock no other process resumes it in between; one that found
        # it no longer paused (failed as stale) writes its own event after this one.
        _record_pruned(study, plan, frozen, value)
        if pause.end_paused_trial(study, trial_id(frozen), TrialState.PRUNED, value):
            ended.append(out.number)
            if checkpoint is not None:
                drop_checkpoints(checkpoint.parent, plan.output_dir)
    return ended


def park_unjudged_retries(study: optuna.Study, plan: AshaPlan) -> list[int]:
    """Queued retries that would resume from a rung checkpoint their trial reported a value at but was never judged
    at (killed after the rung's save, before its pause): paused at that rung instead, so ASHA ranks them there. A
    retry left queued would resume after the rung's step and train on to the next rung: a promotion nobody granted."""
    trials = study.get_trials(deepcopy=False)
    by_number = {t.number: t for t in trials}
    parked = []
    for trial in trials:
        checkpoint = trial.user_attrs.get("resume_from")
        if not pause.is_queued_retry(trial) or not checkpoint:
            continue
        point = _unjudged_rung(plan, ancestors(trial, by_number), Path(checkpoint))
        if point is None:
            continue
        value = _inherited(trial, by_number).get(point)
        step = pause.checkpoint_step(checkpoint)
        assert step is not None  # _unjudged_rung read it
        if pause.park_retry(study, trial_id(trial), step=step, checkpoint=checkpoint, value=value):
            logger.info(
                "trial %d: parked at its rung step %d, where trial %s died before pausing",
                trial.number,
                step,
                trial.user_attrs.get("requeued_from_trial"),
            )
            parked.append(trial.number)
    return parked


def _unjudged_rung(plan: AshaPlan, chain: list[FrozenTrial], checkpoint: Path) -> int | None:
    """The rung point of `checkpoint` when the chain reported a value there and was neither resumed from it (a
    promotion) nor promoted from it in place; else None."""
    step = pause.checkpoint_step(checkpoint)
    point = _rung_point(plan, checkpoint, step) if step is not None else None
    if point is None:
        return None
    reported = any(point in pause.boundaries(t) for t in chain)
    resumed = any(step in (t.system_attrs.get(pause.RESUMED_AT) or []) for t in chain)
    in_place = any(point in (t.system_attrs.get(IN_PLACE) or []) for t in chain)
    return point if reported and not resumed and not in_place else None


def _rung_point(plan: AshaPlan, checkpoint: Path, step: int) -> int | None:
    """The rung level a checkpoint was saved at: its step, or with `resource: epochs` the whole epoch its trainer
    state records; None when it is not at a rung."""
    if plan.resource != "epochs":
        return step if step in plan.levels else None
    try:
        epoch = float(json.loads((checkpoint / STATE_FILE).read_text())["epoch"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    point = round(epoch)
    return point if point in plan.levels and math.isclose(epoch, point, abs_tol=1e-6) else None


def _record_pruned(study: optuna.Study, plan: AshaPlan, trial: FrozenTrial, value: float | None) -> None:
    """The store's run of a paused trial says "paused" until this event: no process of the trial is left to say how
    it ended."""
    if plan.store is None:
        return
    origin = origin_attrs(trial.user_attrs)
    if "requeued_from_trial" in origin:
        # A retry parked at its predecessor's rung (park_unjudged_retries) and ended here never ran a process to say
        # which trial it continues; that predecessor's run said "running" (tests/chaos/campaign.py seed 185304).
        run = RunInfo(study_name=study.study_name, trial_number=trial.number, origin=origin)
        record_origin(plan.store, run)
    step = pause.pause_info(trial).get("step")
    message = f"pruned at step {step} (value {value}): it can no longer be promoted"
    record_event(plan.store, trial_run_id(study.study_name, trial.number), "pruned", message, {"step": step})


def _by_number(study: optuna.Study, number: int) -> FrozenTrial | None:
    return next((t for t in study.get_trials(deepcopy=False) if t.number == number), None)


# ---- in the trial process: at a rung --------------------------------------------------------------------------
def rung_decider(study: optuna.Study, trial: optuna.Trial, plan: AshaPlan, lock_dir: Path) -> Any:
    """`decide(point, value)` for `PauseCallback`: record the rung value (in the database, and as an intermediate
    value the sampler sees), then pause unless ASHA would promote this trial right now. A retry goes on at once past
    the rungs its configuration was promoted from in place before it crashed: a promotion granted is not judged again
    (tests/chaos seed 56163: a retry that started over, its predecessor's checkpoints damaged, was pruned at a rung its
    configuration had been promoted from)."""
    promoted_before = _chain_in_place(study, trial)

    def decide(point: int, value: float | None) -> bool:
        if value is not None:
            pause.record_boundary(study, trial_id(trial), point, value)
            trial.report(value, point)
        if point in promoted_before:
            _record_in_place(study, trial, point)
            return False
        if plan.gate is not None and not plan.gate.is_open(
            gate_pairs(study.get_trials(deepcopy=False), point)
        ):
            record_heartbeat(study, trial)
            _record_in_place(study, trial, point)  # not judged here: it goes on as if promoted
            return False
        if not plan.in_place:
            return True
        # Whole, from the lock: on PostgreSQL an outage frees it (hpo.storage.database.claim_lock).
        return not outage.ride(
            lambda: _promoted_in_place(study, trial, plan, lock_dir, point), "judge a rung"
        )

    return decide


def _chain_in_place(study: optuna.Study, trial: optuna.Trial) -> set[int]:
    """The rung points the trials `trial` continues (a retry's predecessors) were promoted from in place."""
    by_number = {t.number: t for t in study.get_trials(deepcopy=False)}
    frozen = by_number.get(trial.number)
    if frozen is None:
        return set()
    return {point for t in ancestors(frozen, by_number) for point in t.system_attrs.get(IN_PLACE) or []}


def _promoted_in_place(
    study: optuna.Study, trial: optuna.Trial, plan: AshaPlan, lock_dir: Path, point: int
) -> bool:
    """Under the claim lock: whether ASHA promotes this trial at `point` now (it then trains on without a pause)."""
    with claim_lock(storage_of(study), study.study_name, lock_dir):
        table = rung_table(study, plan)
        for entry in table:
            if entry.number == trial.number:  # as the rule would see it, paused here and not promoted yet
                entry.paused, entry.running = True, False
                entry.promoted.discard(entry.rung)
        choice = next_promotion(table, len(plan.levels), plan.eta, plan.maximize, plan.underfilled)
        record_heartbeat(study, trial)
        if choice is None or choice.number != trial.number:
            return False
        _record_in_place(study, trial, point)  # a retry from this rung's checkpoint goes on, judged already
        return True


def _record_in_place(study: optuna.Study, trial: optuna.Trial, point: int) -> None:
    storage = storage_of(study)
    known = list(storage.get_trial(trial_id(trial)).system_attrs.get(IN_PLACE) or [])
    storage.set_trial_system_attr(trial_id(trial), IN_PLACE, [*known, point])


def pause_callback(
    study: optuna.Study, trial: optuna.Trial, plan: AshaPlan, lock_dir: Path, *, rank_zero: bool
) -> PauseCallback:
    decide = rung_decider(study, trial, plan, lock_dir)
    return PauseCallback(plan.levels, plan.metric, decide, resource=plan.resource, is_rank_zero=rank_zero)  # type: ignore[arg-type]


def drop_older_checkpoints(checkpoint: Path, best: str | None = None, output_dir: str | None = None) -> None:
    """A paused trial keeps only the checkpoint it resumes from, and its `best` one (`objective: best`): promoted,
    it may complete with that evaluation as its value, and export needs the model scored there."""
    keep = {checkpoint.resolve()} | ({Path(best).resolve()} if best else set())
    if output_dir is not None:
        keep = {remote.localize(path, output_dir).resolve() for path in keep}
    drop_checkpoints(checkpoint.parent, output_dir, keep)


def drop_checkpoints(run_dir: Path, output_dir: str | None, keep: Set[Path] = frozenset()) -> None:
    """Delete a trial folder's checkpoints but `keep`: here, and in the object store behind a URL output folder
    (recorded paths may name another machine's mirror: read as this one's)."""
    if output_dir is None:
        for folder in checkpoints_in(run_dir):
            if folder.resolve() not in keep:
                shutil.rmtree(folder, ignore_errors=True)
        return
    for folder in checkpoints_in(remote.localize(run_dir, output_dir), output_dir):
        if folder.resolve() not in keep:
            remote.remove(folder, output_dir)
