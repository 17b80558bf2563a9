"""A configuration's attempts: a retry is a new trial whose user attribute `requeued_from_trial` names the attempt it
continues (hpo.storage.retry), back to the first."""

from __future__ import annotations

from optuna.trial import FrozenTrial

REQUEUED_FROM = "requeued_from_trial"


def attempt_chain(trials: list[FrozenTrial], number: int) -> list[FrozenTrial]:
    """Trial `number` and the attempts it continues, latest first (a number not among `trials` ends the chain)."""
    by_number = {t.number: t for t in trials}
    chain: list[FrozenTrial] = []
    seen: set[int] = set()
    while number in by_number and number not in seen:
        seen.add(number)
        chain.append(by_number[number])
        number = by_number[number].user_attrs.get(REQUEUED_FROM, -1)
    return chain
