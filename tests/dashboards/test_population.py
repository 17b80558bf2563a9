"""The study page's PBT section from a real SQLite study: members' scores by interval, copies, the winning schedule."""

from __future__ import annotations

import optuna

from dashboards.population import population
from hpo.storage.database import create_storage
from hpo.storage.lineage import MEMBER, Segment, record_segment
from hpo.storage.study_db import storage_of, trial_id


def test_population_lists_members_copies_and_the_winning_schedule(tmp_path):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        storage=create_storage(f"sqlite:///{tmp_path / 'study.db'}"), study_name="pbt", direction="maximize"
    )
    assert population(study, study.get_trials()) is None  # not a PBT study
    scores = {0: [0.6, 0.8], 1: [0.3, 0.9]}
    for number, lr in ((0, 0.1), (1, 0.001)):
        trial = study.ask()
        trial.set_user_attr(MEMBER, number)
        record_segment(storage_of(study), trial_id(trial), Segment(0, {"learning_rate": lr}))
        if number == 1:  # the weaker member copied member 0 at step 10 and explored
            record_segment(storage_of(study), trial_id(trial), Segment(10, {"learning_rate": 0.12}, source=0))
        for step, score in zip((10, 20), scores[number], strict=True):
            trial.report(score, step)
        study.tell(trial, scores[number][-1])
    shown = population(study, study.get_trials())
    assert [m["member"] for m in shown["members"]] == [0, 1]
    assert shown["members"][1]["scores"] == [[10, 0.3], [20, 0.9]] and shown["members"][1]["copies"] == [
        [10, 0]
    ]
    winner = shown["winner"]
    assert (winner["member"], winner["value"]) == (1, 0.9)
    assert [(s["step"], s["params"]["learning_rate"], s["member"]) for s in winner["schedule"]] == [
        (0, 0.1, 0),
        (10, 0.12, 1),
    ]
