"""With several objectives, retention keeps the checkpoint of each objective's best on the Pareto front: `hpo export
--metric M` ships the front's best at M, and keeping only the first objective's best left export with no checkpoint
for the others (the multi-objective export test failed in CI whenever its two trials were both on the front)."""

from __future__ import annotations

from pathlib import Path

import optuna
from study_task import write_study

from hpo.spec import load_study_spec
from hpo.storage.retention import top_trials
from hpo.storage.study_db import pick_trial


def test_each_metrics_best_on_the_front_keeps_its_checkpoint(tmp_path: Path) -> None:
    data = {
        "metric": None,
        "direction": None,
        "metrics": ["accuracy", "loss"],
        "directions": ["maximize", "minimize"],
    }
    spec = load_study_spec(write_study(tmp_path, study=data))
    study = optuna.create_study(directions=["maximize", "minimize"])
    for values in ([0.9, 0.5], [0.8, 0.2], [0.7, 0.6], [0.85, 0.3]):  # trial 2 is dominated
        study.tell(study.ask(), values)
    assert [t.number for t in top_trials(study, 1)] == [0, 1]  # the best accuracy and the best loss
    shipped = {pick_trial(study, spec, metric=m).number for m in ("accuracy", "loss")}  # what export ships
    assert shipped == {0, 1}
    assert [t.number for t in top_trials(study, 2)] == [0, 3, 1]  # two of each, in accuracy's order
