"""An ASHA study on the dashboard: each trial's path through the rungs, which trials wait paused, and per rung how many
trials reached it, wait there, and went on. The study is written by hpo's own pause layer on a real SQLite database."""

from __future__ import annotations

import optuna
from dashboard_fixtures import answer
from optuna.trial import TrialState

from dashboards.api import DashboardApi
from dashboards.optuna_source import OptunaSource
from dashboards.store_reader import StoreReader
from hpo.storage import pause
from hpo.storage.database import create_storage
from hpo.storage.study_db import ask_new, trial_id


def _reach(study, trial, values: dict[int, float]) -> None:
    for point, value in values.items():
        pause.record_boundary(study, trial_id(trial), point, value)
        trial.report(value, point)


def test_rungs_paths_and_paused_trials_are_shown(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(study_name="asha", storage=create_storage(url), direction="maximize")
    trials = [ask_new(study) for _ in range(4)]
    for trial in trials:
        trial.suggest_float("x", 0, 1)
    _reach(study, trials[0], {4: 0.9, 12: 0.95})
    study.tell(trials[0], 0.97)  # promoted twice: complete
    _reach(study, trials[1], {4: 0.8, 12: 0.85})
    pause.pause_trial(study, trial_id(trials[1]), step=12, checkpoint=str(tmp_path / "c"), value=0.85)
    _reach(study, trials[2], {4: 0.5})
    pause.pause_trial(study, trial_id(trials[2]), step=4, checkpoint=str(tmp_path / "d"), value=0.5)
    pause.end_paused_trial(study, trial_id(trials[2]), TrialState.PRUNED, 0.5)
    _reach(study, trials[3], {4: 0.6})
    pause.pause_trial(study, trial_id(trials[3]), step=4, checkpoint=str(tmp_path / "e"), value=0.6)

    body = answer(DashboardApi(OptunaSource(url), StoreReader(None)), "/api/study", {"name": "asha"})
    rows = {row["number"]: row for row in body["trials"]}
    assert rows[0]["rungs"] == [[4, 0.9], [12, 0.95]] and not rows[0]["paused"]
    assert rows[1]["paused"] and rows[1]["state"] == "WAITING"
    assert rows[3]["paused"] and rows[3]["rungs"] == [[4, 0.6]]
    assert not rows[2]["paused"] and rows[2]["state"] == "PRUNED"
    assert body["summary"]["rungs"] == [
        {"point": 4, "reached": 4, "paused": 1, "promoted": 2},
        {"point": 12, "reached": 2, "paused": 1, "promoted": 1},
    ]
