"""A paused and resumed trial trains in pieces: the dashboard's API gives each piece's start and end (recorded by the
worker at every pause), so the timeline draws one bar per piece, not only the last one; the best-trial panel of a PBT
study shows the winner's current values. From a real `hpo run` of a small PBT study on SQLite."""

from __future__ import annotations

import optuna
from dashboard_fixtures import answer
from scheduler_support import run_hpo_to_end
from study_task import write_study

from dashboards.api import DashboardApi
from dashboards.optuna_source import OptunaSource
from dashboards.store_reader import StoreReader
from hpo.storage import pause

PBT = {
    "type": "pbt",
    "population": 3,
    "perturbation_interval": 4,
    "max_resource": 12,
    "quantile_fraction": 0.34,
    "resample_probability": 0.0,
    "mutations": {"learning_rate": {"factors": [0.5, 2.0]}},
}


def test_each_piece_of_a_pbt_member_is_a_bar_and_the_best_panel_shows_current_values(tmp_path):
    write_study(
        tmp_path,
        study={"scheduler": PBT, "sampler": {"type": "random", "seed": 0}},
        training={"max_steps": None, "lr_scheduler_type": "linear"},
        search_space={"learning_rate": {"type": "float", "low": 1.0e-4, "high": 0.5, "log": True}},
        resources={"workers": 1},
    )
    run_hpo_to_end(tmp_path, "run")
    url = f"sqlite:///{tmp_path / 'out' / 'study.db'}"
    api = DashboardApi(OptunaSource(url), StoreReader(None))
    # A member pauses at an interval unless it is decided there at once and kept (then it trains on in place): one
    # piece per process that trained it, the first one and each resume.
    study = optuna.load_study(study_name="test", storage=url)
    processes = {t.number: 1 + len(t.system_attrs.get(pause.RESUMED_AT) or []) for t in study.trials}
    shown = answer(api, "/api/study", {"name": "test"})
    rows = {row["number"]: row for row in shown["trials"]}
    assert len(rows) == 3 and {row["state"] for row in rows.values()} == {"COMPLETE"}
    every_piece = []
    for row in rows.values():
        pieces = row["pieces"]
        assert len(pieces) == processes[row["number"]], (row["number"], pieces)
        assert all(start < end for start, end in pieces)
        assert all(a[1] <= b[0] for a, b in zip(pieces, pieces[1:], strict=False)), pieces  # in order, apart
        assert pieces[-1][1] == row["end"]
        every_piece += pieces
    assert len(every_piece) > len(rows)  # one worker, three members: some were paused and resumed
    # One worker: its pieces never overlap, whichever member they belong to.
    every_piece.sort()
    assert all(a[1] <= b[0] for a, b in zip(every_piece, every_piece[1:], strict=False)), every_piece
    # The best-trial panel: the winner, with the values it trains with now (its lineage's last), as the table shows.
    best = shown["summary"]["best"]["numbers"]
    assert len(best) == 1
    population = shown["population"]
    winner = rows[best[0]]
    assert winner["params"] == population["winner"]["schedule"][-1]["params"]
