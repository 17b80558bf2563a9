"""A retry's chain of attempts, read from a real Optuna study's `requeued_from_trial` attributes."""

from __future__ import annotations

import optuna

from hpo.storage.attempts import REQUEUED_FROM, ancestors, attempt_chain


def _study_with_links(links: dict[int, int | None]) -> list[optuna.trial.FrozenTrial]:
    """One finished trial per key, its `requeued_from_trial` the value (None: a first attempt)."""
    study = optuna.create_study()
    for number in sorted(links):
        trial = study.ask()
        if links[number] is not None:
            trial.set_user_attr(REQUEUED_FROM, links[number])
        study.tell(trial, float(number))
    return study.get_trials()


def test_a_retry_of_a_retry_descends_from_both_newest_first() -> None:
    trials = _study_with_links({0: None, 1: 0, 2: None, 3: 1})
    by_number = {t.number: t for t in trials}
    assert [t.number for t in ancestors(by_number[3], by_number)] == [1, 0]
    assert [t.number for t in attempt_chain(trials, 3)] == [3, 1, 0]
    assert ancestors(by_number[2], by_number) == []


def test_a_link_to_a_trial_not_in_the_study_ends_the_chain() -> None:
    trials = _study_with_links({0: None, 1: 7})
    assert [t.number for t in attempt_chain(trials, 1)] == [1]
    assert attempt_chain(trials, 9) == []


def test_a_cycle_in_the_attributes_ends_instead_of_looping() -> None:
    trials = _study_with_links({0: 1, 1: 0})
    by_number = {t.number: t for t in trials}
    assert [t.number for t in ancestors(by_number[0], by_number)] == [1]
