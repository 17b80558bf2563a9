"""A tie for the best value names one trial everywhere: export, `hpo status` and retention take the lowest number.
Optuna's `best_trial` takes the first to finish (in memory) or the database's row order, so retention could keep one
trial's checkpoint while export picked the other and refused (tests/chaos/campaign.py seed 944984, PBT on PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import optuna
from study_task import write_study

from hpo.spec import load_study_spec
from hpo.storage.retention import top_trials
from hpo.storage.study_db import pick_trial
from hpo.study.summary import best_trials


def test_a_tie_for_best_is_the_lowest_trial_number_for_export_status_and_retention(tmp_path: Path) -> None:
    spec = load_study_spec(write_study(tmp_path))
    study = optuna.create_study(direction="maximize")
    first, second, worse = study.ask(), study.ask(), study.ask()
    study.tell(worse, 0.5)
    study.tell(second, 0.9)  # the later trial finishes first ...
    study.tell(first, 0.9)  # ... with the same value
    assert study.best_trial.number == 1  # Optuna: the first to finish
    assert pick_trial(study, spec).number == 0  # what `hpo export` ships
    assert [t.number for t in best_trials(study)] == [0]  # what `hpo status` and `hpo best` mark
    assert [t.number for t in top_trials(study, 1)] == [0]  # whose checkpoint retention keeps
