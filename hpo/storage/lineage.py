"""PBT lineage in the study's database: each member's history of hyperparameters and copies, and the schedule it adds
up to.

A member is an Optuna trial. Its system attribute `hpo:lineage` lists its segments, oldest first:

    [{"step": 0,  "params": {...}, "source": null},          # started with its sampled hyperparameters
     {"step": 40, "params": {...}, "source": 3}]             # at step 40: copied member 3's checkpoint-40, explored

Scores are the trial's intermediate values (`trial.report(score, step)` at every interval), which Optuna's samplers,
`hpo status` and the dashboards already read. A member's own segments say what *it* did; its `schedule` follows the
copies back: before step 40 its weights are member 3's, so its schedule is member 3's schedule up to step 40, then its
own from there. That schedule, applied from step 0 in one run, is PBT replay.

This module imports only Optuna (the dashboards read lineage with it); writers pass the study's storage.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial

from hpo.storage.attempts import ancestors

LINEAGE = "hpo:lineage"
MEMBER = "pbt_member"  # user attribute: the member a trial belongs to (a crash retry continues its member)


@dataclass(frozen=True)
class Segment:
    step: int  # the global step from which `params` apply
    params: dict[str, Any]
    source: int | None = (
        None  # the member whose checkpoint at `step` this member copied (None: its own weights)
    )
    member: int | None = field(default=None, compare=False)  # whose history this is (filled by `schedule`)


def segments(trial: FrozenTrial) -> list[Segment]:
    """The member's own segments; a trial without lineage is one segment of its sampled parameters."""
    stored = trial.system_attrs.get(LINEAGE)
    member = int(trial.user_attrs.get(MEMBER, trial.number))
    if not stored:
        return [Segment(0, dict(trial.params), None, member)]
    return [Segment(int(s["step"]), dict(s["params"]), s.get("source"), member) for s in stored]


def current_params(trial: FrozenTrial) -> dict[str, Any]:
    return segments(trial)[-1].params


def record_segment(storage: BaseStorage, trial_id: int, segment: Segment) -> None:
    """Append a segment (a repeated record of the same step, after a crash between deciding and training, replaces
    the earlier one: the decision is seeded, so it is the same decision)."""
    trial = storage.get_trial(trial_id)
    kept = [s for s in (trial.system_attrs.get(LINEAGE) or []) if int(s["step"]) < segment.step]
    if not kept and segment.step > 0:
        kept = [{"step": 0, "params": dict(trial.params), "source": None}]
    entry = {k: v for k, v in asdict(segment).items() if k != "member"}
    storage.set_trial_system_attr(trial_id, LINEAGE, [*kept, entry])


def schedule(trials: Mapping[int, FrozenTrial], member: int, until: int | None = None) -> list[Segment]:
    """The hyperparameters `member`'s weights were trained with, from step 0: its own segments since its last copy,
    and before that the schedule of the member it copied, up to the step of the copy. Each segment names the member
    that trained it."""
    own = [s for s in segments(trials[member]) if until is None or s.step < until]
    copies = [i for i, s in enumerate(own) if s.source is not None]
    if not copies:
        return own
    last = copies[-1]
    copy = own[last]
    assert copy.source is not None
    return [*schedule(trials, copy.source, until=copy.step), *own[last:]]


def changes(steps: list[Segment]) -> dict[int, dict[str, Any]]:
    """From a schedule, what changes at each step after the first (for `trainer.hyperparams.HyperparameterSchedule`)."""
    result: dict[int, dict[str, Any]] = {}
    for before, after in zip(steps, steps[1:], strict=False):
        changed = {k: v for k, v in after.params.items() if before.params.get(k) != v}
        if changed:
            result[after.step] = changed
    return result


def as_records(steps: list[Segment]) -> list[dict[str, Any]]:
    """A schedule for JSON (export cards, the dashboard): step, hyperparameters, the member that trained it."""
    return [{"step": s.step, "params": s.params, "member": s.member, "copied_from": s.source} for s in steps]


# ---- members: a member is its first trial and the retries that continue it ---------------------------------------
def member_of(trial: FrozenTrial, by_number: Mapping[int, FrozenTrial]) -> int:
    """The member a trial belongs to: its `pbt_member` attribute, else the member of the trial it retries."""
    chain = [trial, *ancestors(trial, by_number)]
    for attempt in chain:
        if attempt.user_attrs.get(MEMBER) is not None:
            return int(attempt.user_attrs[MEMBER])
    return chain[-1].number


def members(trials: list[FrozenTrial]) -> dict[int, list[FrozenTrial]]:
    """Each member's trials, oldest first (its first trial, then the retries that continued it)."""
    by_number = {t.number: t for t in trials}
    grouped: dict[int, list[FrozenTrial]] = {}
    for trial in sorted(trials, key=lambda t: t.number):
        grouped.setdefault(member_of(trial, by_number), []).append(trial)
    return grouped


def latest_by_member(trials: list[FrozenTrial]) -> dict[int, FrozenTrial]:
    """Each member's newest trial: the one that holds its lineage (a retry copies its predecessor's when it starts)."""
    return {member: chain[-1] for member, chain in members(trials).items()}


def member_scores(chain: list[FrozenTrial]) -> dict[int, float]:
    """A member's score at each interval, by step, over all its trials."""
    scores: dict[int, float] = {}
    for trial in chain:
        scores.update({int(step): float(value) for step, value in trial.intermediate_values.items()})
    return scores
