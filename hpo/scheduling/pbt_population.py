"""The population at an interval, as a pure function of the members' states: when a step's decisions can be taken, and
what they are.

Members train in lockstep: each one pauses at every interval (a checkpoint, its score as the trial's intermediate value)
and the decisions at step t wait until every live member of the population has a score at t. Then, in one go, each
member paused at t is either left as it is or, in the bottom quantile, set to continue from a top member's checkpoint at
t with explored hyperparameters. Deciding only on complete scores makes the quantiles the same whichever worker takes the
decision, and since no member trains past t before its step is decided, every checkpoint at t a member may copy still
exists. Members beyond the free slots wait paused (or not started) until a slot frees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hpo.scheduling.pbt_rule import choose_source, decision_rng, explore
from hpo.spec.pbt import PbtSchedulerSpec
from hpo.spec.search_space import ParamSpec


@dataclass
class Member:
    number: int
    scores: dict[int, float]  # step -> score at that interval
    params_by_step: list[
        tuple[int, dict[str, Any]]
    ]  # its lineage: (from step, hyperparameters), oldest first
    paused_at: int | None = None  # the interval it waits at, None when running, finished or not paused
    decided: set[int] = field(default_factory=set)  # intervals whose decision was taken for it
    dead: bool = False  # failed for good: no longer part of the population

    def params_at(self, step: int) -> dict[str, Any]:
        """The hyperparameters in force at `step` (a copy at `step` starts from these)."""
        chosen = self.params_by_step[0][1]
        for start, params in self.params_by_step:
            if start <= step:
                chosen = params
        return chosen


@dataclass(frozen=True)
class Decision:
    member: int
    step: int
    source: int | None  # None: it continues its own training unchanged
    params: dict[str, Any]
    changes: dict[str, Any]  # what differs from the source's values at `step` (applied when it resumes)


def step_complete(members: list[Member], population: int, step: int) -> bool:
    """Every member of the population has started, and every live one has a score at `step`."""
    return len(members) >= population and all(m.dead or step in m.scores for m in members)


def all_stopped(members: list[Member], step: int) -> bool:
    """Every live member is stopped at `step` (paused, or waiting in its process) or was decided there already: the
    step's decisions are then taken in one go, before any member trains past it and drops its checkpoint there. A
    member that scored at `step` and is still saving there is waited for, not left to be decided alone later, when
    the checkpoint it would copy may be gone."""
    return all(m.dead or m.paused_at == step or step in m.decided for m in members)


def steps_to_decide(members: list[Member], population: int) -> list[int]:
    """Intervals with a paused, undecided member whose scores are complete and whose members all stopped there,
    lowest first."""
    waiting = {m.paused_at for m in members if m.paused_at is not None and m.paused_at not in m.decided}
    return sorted(
        s
        for s in waiting
        if s is not None and step_complete(members, population, s) and all_stopped(members, s)
    )


def decide(
    members: list[Member],
    step: int,
    scheduler: PbtSchedulerSpec,
    space: dict[str, ParamSpec],
    maximize: bool,
    seed: int | None,
) -> list[Decision]:
    """The decisions at `step` for the members paused there and not yet decided."""
    scores = {m.number: m.scores[step] for m in members if not m.dead and step in m.scores}
    by_number = {m.number: m for m in members}
    decisions = []
    for member in sorted(members, key=lambda m: m.number):
        if member.paused_at != step or step in member.decided:
            continue
        rng = decision_rng(seed, member.number, step)
        source = choose_source(member.number, scores, scheduler.quantile_fraction, maximize, rng)
        if source is None:
            decisions.append(Decision(member.number, step, None, member.params_at(step), {}))
            continue
        copied = by_number[source].params_at(step)
        params = explore(copied, scheduler.mutations, space, scheduler.resample_probability, rng)
        changes = {k: v for k, v in params.items() if copied.get(k) != v}
        decisions.append(Decision(member.number, step, source, params, changes))
    return decisions
