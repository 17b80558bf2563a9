"""A configuration's attempts: a retry is a new trial whose user attribute `requeued_from_trial` names the attempt it
continues (hpo.storage.retry), back to the first."""

from __future__ import annotations

from collections.abc import Mapping

from optuna.trial import FrozenTrial

REQUEUED_FROM = "requeued_from_trial"


def ancestors(trial: FrozenTrial, by_number: Mapping[int, FrozenTrial]) -> list[FrozenTrial]:
    """The attempts `trial` continues, newest first, not `trial` itself. A number not in `by_number` ends the chain,
    and so does one already walked (a cycle, which no retry writes, cannot loop)."""
    chain: list[FrozenTrial] = []
    seen = {trial.number}
    previous = trial.user_attrs.get(REQUEUED_FROM)
    while previous is not None and int(previous) in by_number and int(previous) not in seen:
        trial = by_number[int(previous)]
        seen.add(trial.number)
        chain.append(trial)
        previous = trial.user_attrs.get(REQUEUED_FROM)
    return chain


def attempt_chain(trials: list[FrozenTrial], number: int) -> list[FrozenTrial]:
    """Trial `number` and the attempts it continues, latest first (a number not among `trials` ends the chain)."""
    by_number = {t.number: t for t in trials}
    if number not in by_number:
        return []
    return [by_number[number], *ancestors(by_number[number], by_number)]
