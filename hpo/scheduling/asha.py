"""The ASHA promotion rule (Li et al., "A System for Massively Parallel Hyperparameter Tuning", MLSys 2020), as pure
functions of the rung tables: no Optuna, no database, so the rule is tested on its own.

Rungs are resource levels r_k = min_resource * eta^k below max_resource; the last level is max_resource itself. A trial
trains to its next rung, reports its value there and pauses. When a slot frees (`next_promotion`), the rule looks at the
rungs from the highest down and promotes the best paused trial of a rung that is in the top 1/eta of everyone who
reached that rung (floor(n_k / eta) trials) and was not promoted from it yet; without one, a new configuration starts.
Nothing waits for a rung to fill: that is the "asynchronous" of ASHA.

`underfilled=True` (hpo's default, `scheduler.promote_underfilled`): a rung's best trial may go on while the rung
holds fewer than eta trials (the top max(1, floor(n_k / eta))), as Optuna's successive-halving pruner lets it. The
paper's rule promotes nothing until eta trials reached a rung, so the first trials wait for a whole rung to fill
before any of them trains on: the search sees no full-budget value until late (issue 23's benchmark).

`hopeless` is what makes the disk bound and the final states possible: a paused trial whose place in its rung is below
floor(N / eta) even if every trial that could still reach the rung (N) arrived behind it will never be promoted, so it
can end PRUNED now and its checkpoint can go.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class RungTrial:
    """What the rule knows of one trial: its value at each rung it reached, whether it is paused (at its highest rung)
    or still running, and the rungs it was promoted from."""

    number: int
    values: dict[int, float] = field(default_factory=dict)  # rung index -> value reported there
    paused: bool = False
    running: bool = False
    promoted: set[int] = field(default_factory=set)

    @property
    def rung(self) -> int:
        """The highest rung reached (-1: none yet)."""
        return max(self.values, default=-1)


@dataclass(frozen=True)
class Promotion:
    number: int
    rung: int  # the rung it is promoted from; it trains on to the next one


def ranking(trials: list[RungTrial], rung: int, maximize: bool) -> list[RungTrial]:
    """The trials that reached `rung`, best first (ties: the older trial first, so every process ranks alike)."""
    reached = [t for t in trials if rung in t.values and math.isfinite(t.values[rung])]
    return sorted(reached, key=lambda t: (-t.values[rung] if maximize else t.values[rung], t.number))


def top_size(reached: int, eta: int, underfilled: bool) -> int:
    """How many of the `reached` trials of a rung may go on: floor(n / eta), at least 1 with `underfilled`."""
    top = reached // eta
    return max(1, top) if underfilled and reached else top


def promotable(
    trials: list[RungTrial], rung: int, eta: int, maximize: bool, underfilled: bool = False
) -> list[RungTrial]:
    """Paused trials at `rung`, not yet promoted from it, in its top floor(n / eta) (at least its best one with
    `underfilled`); best first."""
    ranked = ranking(trials, rung, maximize)
    top = ranked[: top_size(len(ranked), eta, underfilled)]
    return [t for t in top if t.paused and t.rung == rung and rung not in t.promoted]


def next_promotion(
    trials: list[RungTrial], rungs: int, eta: int, maximize: bool, underfilled: bool = False
) -> Promotion | None:
    """What a free slot does: promote the best promotable trial of the highest rung that has one, else None (start a
    new configuration). `rungs` is the number of pause levels (len(rung_levels(...)))."""
    for rung in range(rungs - 1, -1, -1):
        found = promotable(trials, rung, eta, maximize, underfilled)
        if found:
            return Promotion(found[0].number, rung)
    return None


def hopeless(
    trials: list[RungTrial],
    eta: int,
    maximize: bool,
    new_configurations: int | None,
    underfilled: bool = False,
) -> list[RungTrial]:
    """Paused trials that can never be promoted, whatever happens next.

    At most n_k + (trials alive below rung k) + new_configurations trials can ever reach rung k. A paused trial ranked
    p among the n_k there today can only fall in rank, so if p > floor(that maximum / eta) it is out for good (with
    `underfilled` the best of a rung is never out: it is promotable however few trials the rung ever holds).
    `new_configurations=None` (no n_trials: the study runs until its timeout) means anything may still arrive."""
    if new_configurations is None:
        return []
    out: list[RungTrial] = []
    gone: set[int] = set()
    rungs = sorted({t.rung for t in trials if t.paused})
    # Rankings do not change as trials drop out (an ended trial keeps its rung values); only who may still arrive does.
    places = {
        rung: {t.number: i + 1 for i, t in enumerate(ranking(trials, rung, maximize))} for rung in rungs
    }
    while True:  # one out can make another out: it no longer counts as a trial that may still arrive above it
        alive = [t.rung for t in trials if (t.paused or t.running) and t.number not in gone]
        found = []
        for trial in trials:
            if not trial.paused or trial.number in gone:
                continue
            rung, ranked = trial.rung, places[trial.rung]
            most = len(ranked) + sum(1 for r in alive if r < rung) + new_configurations
            if ranked.get(trial.number, len(ranked) + 1) > top_size(most, eta, underfilled):
                found.append(trial)
        if not found:
            return out
        out += found
        gone |= {t.number for t in found}


def rung_counts(trials: list[RungTrial], rungs: int) -> list[dict[str, int]]:
    """Per rung: how many trials reached it, are paused there, and were promoted from it (for `hpo status`)."""
    table = []
    for rung in range(rungs):
        reached = [t for t in trials if rung in t.values]
        table.append(
            {
                "rung": rung,
                "reached": len(reached),
                "paused": sum(1 for t in reached if t.paused and t.rung == rung),
                "promoted": sum(1 for t in reached if rung in t.promoted),
            }
        )
    return table


def values_by_rung(boundaries: Mapping[int, float], levels: list[int]) -> dict[int, float]:
    """A trial's rung values from the values it reported at resource levels (level -> value)."""
    return {k: float(boundaries[level]) for k, level in enumerate(levels) if level in boundaries}
