"""PBT on the study's database: members pause at every interval (hpo.trial.pause, hpo.storage.pause), and a free slot
takes the next piece of work under the claim lock.

    claim_pbt_work(study, plan, owner):                       under claim_lock, one claimer at a time on every machine
        a retry from an interval its member scored at but died before pausing: parked there (paused, undecided)
        a queued retry first (a crashed member continuing from its checkpoint; it adopts the member's lineage)
        for each interval whose scores are complete (hpo.scheduling.pbt_population): take its decisions at once:
            bottom quantile -> copy the source's checkpoint at that step into the member's folder (trainer.checkpoint),
                               record the segment (hpo.storage.lineage: step, explored values, source)
            every member paused there -> marked decided
        resume a decided paused member, lowest step first (lockstep), from its checkpoint
        else a new member while fewer than `population` have started
        else nothing (the worker waits while members train, and leaves when none does)

In the member's process: `pbt_pause_callback` reports the score at each interval as the trial's intermediate value and
pauses, unless, once its checkpoint there is saved, that interval's decisions can be taken at once and leave it as it
is: then it trains on in place (hpo.scheduling.pbt_in_place), as a promoted ASHA trial does; a resumed member trains with its current values (`run_trial(params=...)`) and, when it resumes from a copied
checkpoint, applies what changed at that step (`trainer.hyperparams.HyperparameterSchedule`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpo.scheduling.pbt_population import Decision, Member, decide, steps_to_decide
from hpo.spec import StudySpec
from hpo.spec.pbt import PbtSchedulerSpec
from hpo.storage import pause, remote
from hpo.storage.lineage import (
    LINEAGE,
    MEMBER,
    Segment,
    changes,
    latest_by_member,
    member_of,
    member_scores,
    members,
    record_segment,
    schedule,
    segments,
)
from hpo.storage.study_db import ask_new, ask_queued, storage_of, trial_id
from hpo.trial.pause import AfterSave, PauseCallback
from trainer.checkpoint import checkpoint_dir, copy_checkpoint
from trainer.errors import CheckpointError

logger = logging.getLogger(__name__)

DECIDED = "hpo:pbt_decided"  # system attribute: the intervals whose decision was taken for this member
WAITING = (
    "hpo:pbt_waiting"  # system attribute: the interval a running member waits at, its checkpoint saved there
)


@dataclass(frozen=True)
class PbtPlan:
    scheduler: PbtSchedulerSpec
    space: dict[str, Any]
    maximize: bool
    metric: str
    seed: int | None
    output_dir: str | None = None  # checkpoints there, and in the object store behind it (hpo.storage.remote)

    @classmethod
    def of(cls, spec: StudySpec) -> PbtPlan | None:
        scheduler = spec.study.scheduler
        if scheduler is None or scheduler.type != "pbt":
            return None
        return cls(
            scheduler=scheduler,
            space=dict(spec.search_space),
            maximize=(spec.study.directions or ["minimize"])[0] == "maximize",
            metric=(spec.study.metrics or ["eval_loss"])[0],
            seed=spec.study.sampler.seed,
            output_dir=spec.output_dir,
        )

    @property
    def pause_points(self) -> list[int]:
        return self.scheduler.intervals()[:-1]  # at max_resource a member completes


# ---- in the member's process ------------------------------------------------------------------------------------
def pbt_pause_callback(
    trial: optuna.Trial, plan: PbtPlan, *, rank_zero: bool, after_save: AfterSave | None = None
) -> PauseCallback:
    """Pause at every interval, with the score there as the trial's intermediate value (NaN when not finite: it ranks
    last, and the population still counts the member as scored). `after_save`: once the checkpoint there is on disk,
    whether to train on in place after all (hpo.scheduling.pbt_in_place)."""

    def decide(point: int, value: float | None) -> bool:
        trial.report(math.nan if value is None else value, point)
        return True

    return PauseCallback(
        plan.pause_points,
        plan.metric,
        decide,
        resource="steps",
        is_rank_zero=rank_zero,
        after_save=after_save,
    )


# ---- the population from the database ---------------------------------------------------------------------------
def population(
    study: optuna.Study, trials: list[FrozenTrial] | None = None
) -> tuple[list[Member], dict[int, FrozenTrial]]:
    """Each member's state, and its newest trial (the one that trains it and holds its lineage). `trials`: the study's
    trials read a moment ago, to read them once."""
    trials = study.get_trials(deepcopy=False) if trials is None else trials
    latest = latest_by_member(trials)
    states = []
    for number, chain in members(trials).items():
        newest = chain[-1]
        decided = set(newest.system_attrs.get(DECIDED) or [])
        states.append(
            Member(
                number=number,
                scores=member_scores(chain),
                params_by_step=[(s.step, s.params) for s in segments(newest)],
                paused_at=stopped_at(newest, decided),
                decided=decided,
                dead=newest.state == TrialState.FAIL and not newest.user_attrs.get("requeued"),
            )
        )
    return states, latest


def stopped_at(trial: FrozenTrial, decided: set[int]) -> int | None:
    """The interval a member waits at for its decision: paused there, or still in its process with its checkpoint
    there on disk (hpo.scheduling.pbt_in_place), which the decisions treat the same."""
    info = pause.pause_info(trial)
    if info:
        return int(info["step"])
    waiting = trial.system_attrs.get(WAITING)
    if trial.state == TrialState.RUNNING and waiting is not None and int(waiting) not in decided:
        return int(waiting)
    return None


def held_checkpoint(trial: FrozenTrial, step: int) -> Path:
    """The checkpoint a member stopped at `step` holds: the one it is paused at, else its own folder's at `step`
    (a member waiting in its process)."""
    return pause.checkpoint_of(trial) or checkpoint_dir(trial.user_attrs.get("run_dir", ""), step)


def claim_pbt_work(study: optuna.Study, plan: PbtPlan, owner: dict[str, Any]) -> optuna.Trial | None:
    """The next member for a free slot, or None. Call under `claim_lock`."""
    trials: list[FrozenTrial] | None = study.get_trials(deepcopy=False)
    if any(t.state == TrialState.WAITING and not pause.is_paused(t) for t in trials or []):
        # A retry (or an enqueued point) waits. Without one, as almost always, the steps below change nothing and
        # the population is this same read: one read of the trials per claim, not three. A retry queued by a worker
        # a moment after this read is claimed next time, as if it had come a moment later.
        park_undecided_retries(study, plan)
        queued = ask_queued(study)
        if queued is not None:
            adopt(study, trial_id(queued))
            _own(queued, owner)
            return queued
        trials = None
    states, latest = population(study, trials)
    for step in steps_to_decide(states, plan.scheduler.population):
        take_decisions(
            study,
            latest,
            decide(states, step, plan.scheduler, plan.space, plan.maximize, plan.seed),
            plan.output_dir,
        )
        states, latest = population(study)
    ready = sorted(
        (m for m in states if m.paused_at is not None and m.paused_at in m.decided),
        key=lambda m: (m.paused_at, m.number),
    )
    for member in ready:
        frozen = latest[member.number]
        checkpoint = pause.checkpoint_of(frozen)
        if checkpoint is None:
            continue
        # promoted_at_step: the worker records the resume's cost (claim to first step) as it does for ASHA's
        attrs = {**owner, "resume_from": str(checkpoint), "promoted_at_step": member.paused_at}
        resumed = pause.resume_trial(study, trial_id(frozen), attrs)
        if resumed is not None:
            return resumed
    if len(states) < plan.scheduler.population:
        trial = ask_new(study)
        trial.set_user_attr(MEMBER, trial.number)
        _own(trial, owner)
        return trial
    return None


def _own(trial: optuna.Trial, owner: dict[str, Any]) -> None:
    """Who runs the trial, written at once: another worker that finds nothing to claim waits while a trial with an
    owner runs (a member it may have to continue after), instead of leaving."""
    for key, value in owner.items():
        trial.set_user_attr(key, value)


def take_decisions(
    study: optuna.Study,
    latest: dict[int, FrozenTrial],
    decisions: list[Decision],
    output_dir: str | None = None,
) -> None:
    """Copy the sources' checkpoints for the members that exploit, record their new segments, mark all decided."""
    for decision in decisions:
        member = latest[decision.member]
        if decision.source is not None:
            source = latest[decision.source]
            target = held_checkpoint(member, decision.step)
            try:
                exploit(checkpoint_at(source, decision.step), target.parent, output_dir)
            except (CheckpointError, FileNotFoundError) as error:
                # The source's checkpoint was cut short or deleted: this member goes on with its own model and values
                # rather than every worker dying here, under the claim lock, at each try (tests/chaos/campaign.py seed 367814).
                logger.warning("trial %d: not copied from trial %d: %s", member.number, source.number, error)
            else:
                record_segment(
                    storage_of(study),
                    trial_id(member),
                    Segment(decision.step, decision.params, decision.source),
                )
        done = sorted({*(member.system_attrs.get(DECIDED) or []), decision.step})
        storage_of(study).set_trial_system_attr(trial_id(member), DECIDED, done)


def exploit(source: Path, member_dir: Path, output_dir: str | None) -> None:
    """The source's checkpoint becomes the member's at the same step. With a URL output folder either may have been
    written on another machine: the source is fetched, copied in this mirror, and the copy uploaded over the member's
    (its marker changes, so a machine holding the member's old copy fetches the new one)."""
    if output_dir is None or remote.store_of(output_dir) is None:
        copy_checkpoint(source, member_dir)
        return
    fetched, _ = remote.fetch(source, output_dir)
    if fetched is None:
        raise FileNotFoundError(f"{source}: no complete copy in the object store to exploit")
    copied = copy_checkpoint(fetched, remote.localize(member_dir, output_dir))
    remote.upload(copied, output_dir)


def checkpoint_at(trial: FrozenTrial, step: int) -> Path:
    """A member's checkpoint at `step`: the one it is paused at, else the one in its folder."""
    paused = pause.checkpoint_of(trial)
    if paused is not None and paused.name == checkpoint_dir("", step).name:
        return paused
    return checkpoint_dir(trial.user_attrs.get("run_dir", ""), step)


def adopt(study: optuna.Study, retry_id: int) -> None:
    """A crash retry continues its member: it takes the member's number, lineage and decided intervals."""
    storage = storage_of(study)
    frozen = storage.get_trial(retry_id)
    by_number = {t.number: t for t in study.get_trials(deepcopy=False)}
    previous = frozen.user_attrs.get("requeued_from_trial")
    storage.set_trial_user_attr(retry_id, MEMBER, member_of(frozen, by_number))
    if previous is None or int(previous) not in by_number:
        return
    before = by_number[int(previous)]
    for key in (LINEAGE, DECIDED):
        if before.system_attrs.get(key) is not None:
            storage.set_trial_system_attr(retry_id, key, before.system_attrs[key])
    if before.system_attrs.get(LINEAGE) is None and before.params:
        # Never copied: its lineage is its sampled values, which the retry has not sampled yet. Without them the
        # population would see a member with no values (one chosen as a source: KeyError in explore).
        start = [{"step": 0, "params": dict(before.params), "source": None}]
        storage.set_trial_system_attr(retry_id, LINEAGE, start)


def park_undecided_retries(study: optuna.Study, plan: PbtPlan) -> list[int]:
    """Queued retries that would resume from an interval's checkpoint their member scored at but died before
    pausing at (and so before that interval's decision): adopted and paused there instead, so the interval is
    decided for them with the rest of the population. Left queued, the retry would train past the interval with
    no decision, and the population's decision at that step would miss a member."""
    trials = study.get_trials(deepcopy=False)
    parked = []
    for member, chain in members(trials).items():
        retry = chain[-1]
        checkpoint = retry.user_attrs.get("resume_from")
        if not pause.is_queued_retry(retry) or not checkpoint or len(chain) < 2:
            continue
        step = pause.checkpoint_step(checkpoint)
        scores = member_scores(chain[:-1])
        decided = set(chain[-2].system_attrs.get(DECIDED) or [])
        resumed = {s for t in chain for s in (t.system_attrs.get(pause.RESUMED_AT) or [])}
        if step not in plan.pause_points or step not in scores or step in decided or step in resumed:
            continue
        adopt(study, trial_id(retry))
        if pause.park_retry(study, trial_id(retry), step=step, checkpoint=checkpoint, value=scores[step]):
            parked.append(member)
    return parked


# ---- what a claimed member trains with ------------------------------------------------------------------------------
def member_setup(
    study: optuna.Study, trial: optuna.Trial, resume_from: str | None
) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """(its current hyperparameters, {step: changes}) for a member about to train (its parameters sampled). The
    changes are those of a copy made at the step it resumes from: a copied checkpoint holds the source's values, the
    member's own later checkpoints its own."""
    trials = study.get_trials(deepcopy=False)
    by_number = {t.number: t for t in trials}
    member = member_of(by_number[trial.number], by_number)
    steps = schedule(latest_by_member(trials), member)
    if resume_from is None:
        return dict(steps[-1].params), {}
    step = int(Path(resume_from).name.rsplit("-", 1)[1])
    changed = changes(steps).get(step)
    return dict(steps[-1].params), ({step: changed} if changed else {})
