"""PBT lineage in a real study database: segments recorded per member, and the schedule that follows copies back."""

from __future__ import annotations

import optuna
import pytest

from hpo.storage.database import create_storage
from hpo.storage.lineage import (
    Segment,
    as_records,
    changes,
    current_params,
    record_segment,
    schedule,
    segments,
)
from hpo.storage.study_db import storage_of, trial_id

IDS: dict[int, int] = {}


@pytest.fixture
def study(tmp_path) -> optuna.Study:
    """Three members (0, 1, 2) that started at learning rates 0.1, 0.01 and 0.001."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = create_storage(f"sqlite:///{tmp_path / 'study.db'}")
    study = optuna.create_study(storage=storage, study_name="pbt", direction="maximize")
    for lr in (0.1, 0.01, 0.001):
        trial = study.ask()
        IDS[trial.number] = trial_id(trial)
        record_segment(storage_of(study), trial_id(trial), Segment(0, {"learning_rate": lr, "hidden": 16}))
    return study


def by_number(study: optuna.Study) -> dict[int, optuna.trial.FrozenTrial]:
    return {t.number: t for t in study.get_trials(deepcopy=False)}


def test_a_member_without_copies_is_its_own_schedule(study):
    trials = by_number(study)
    assert schedule(trials, 1) == [Segment(0, {"learning_rate": 0.01, "hidden": 16})]
    assert current_params(trials[1]) == {"learning_rate": 0.01, "hidden": 16}


def test_copies_are_followed_back_to_the_source_up_to_the_step_of_the_copy(study):
    ids = IDS
    # step 4: member 2 copies member 0 and explores; step 8: member 1 copies member 2 (which carries 0's history)
    record_segment(storage_of(study), ids[2], Segment(4, {"learning_rate": 0.12, "hidden": 16}, source=0))
    record_segment(storage_of(study), ids[0], Segment(8, {"learning_rate": 0.08, "hidden": 16}, source=None))
    record_segment(storage_of(study), ids[1], Segment(8, {"learning_rate": 0.144, "hidden": 16}, source=2))
    trials = by_number(study)
    steps = schedule(trials, 1)
    assert [(s.step, s.params["learning_rate"], s.member) for s in steps] == [
        (0, 0.1, 0),  # member 0 trained steps 0-4 at 0.1
        (
            4,
            0.12,
            2,
        ),  # member 2 copied it at 4 and trained on at 0.12 (member 0's own change at 8 is not here)
        (8, 0.144, 1),  # member 1 copied member 2 at 8
    ]
    assert changes(steps) == {4: {"learning_rate": 0.12}, 8: {"learning_rate": 0.144}}
    assert as_records(steps)[1] == {
        "step": 4,
        "params": {"learning_rate": 0.12, "hidden": 16},
        "member": 2,
        "copied_from": 0,
    }
    assert [s.step for s in segments(trials[1])] == [0, 8]  # its own history: its start, and the copy


def test_recording_the_same_step_again_replaces_it(study):
    record_segment(storage_of(study), IDS[0], Segment(4, {"learning_rate": 0.2, "hidden": 16}, source=1))
    record_segment(storage_of(study), IDS[0], Segment(4, {"learning_rate": 0.3, "hidden": 16}, source=2))
    stored = segments(by_number(study)[0])
    assert [(s.step, s.source, s.params["learning_rate"]) for s in stored] == [(0, None, 0.1), (4, 2, 0.3)]
