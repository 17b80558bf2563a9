"""The JSON API on a hand-made study fixture (real Optuna studies written by `study.optimize`), for what a finished
`hpo run` cannot show: a trial still running, several objectives, a study name holding markup, live updates."""

from __future__ import annotations

import time
from collections import Counter
from urllib.parse import quote

import optuna
import pytest
from dashboard_fixtures import PARETO_STUDY, STUDY, XSS_STUDY, answer


def test_overview_lists_each_study_with_states_best_and_running(client, demo):
    body = client.json("/api/studies")
    by_name = {study["name"]: study for study in body["studies"]}
    assert set(by_name) == {STUDY, PARETO_STUDY, XSS_STUDY}

    trials = demo["study"].get_trials()
    summary = by_name[STUDY]
    assert summary["n_trials"] == len(trials)
    expected = Counter(trial.state.name for trial in trials)
    assert {state: n for state, n in summary["states"].items() if n} == dict(expected)
    assert summary["directions"] == ["minimize"] and summary["objectives"] == ["eval_loss"]
    assert summary["best"]["values"] == [pytest.approx(demo["study"].best_value)]
    assert summary["best"]["numbers"] == [demo["study"].best_trial.number]
    running = [trial.number for trial in trials if trial.state == optuna.trial.TrialState.RUNNING]
    assert [r["number"] for r in summary["running"]] == running and running

    pareto = by_name[PARETO_STUDY]
    assert pareto["directions"] == ["minimize", "maximize"]
    assert sorted(pareto["best"]["numbers"]) == sorted(t.number for t in demo["pareto"].best_trials)


def test_each_pareto_trial_comes_with_its_export_command(client, demo):
    pareto = client.json(f"/api/study?name={PARETO_STUDY}")
    assert sorted(map(int, pareto["export"])) == sorted(t.number for t in demo["pareto"].best_trials)
    for number, command in pareto["export"].items():
        assert command == f"hpo export studies/demo.yaml --trial {number} --out export-trial-{number}"


def test_incremental_fetch_returns_new_and_named_trials_only(client):
    body = client.json(f"/api/study?name={STUDY}&from=12&refresh=3,5")
    assert sorted(row["number"] for row in body["trials"]) == [3, 5, 12, 13, 14]
    assert body["summary"]["n_trials"] == 15  # the summary still covers the whole study


def test_a_live_study_shows_new_trials_without_restarting(tmp_path):
    """The server's storage caches finished trials; new and running ones must still come through."""
    from dashboards.api import DashboardApi
    from dashboards.optuna_source import OptunaSource
    from dashboards.store_reader import StoreReader

    storage = f"sqlite:///{tmp_path / 'live.db'}"
    writer = optuna.create_study(study_name="live", storage=storage)
    writer.optimize(lambda t: 1 + t.suggest_float("x", 0, 1), n_trials=3)  # all worse than 0.25 below
    api = DashboardApi(OptunaSource(storage), StoreReader(None))
    assert len(answer(api, "/api/study", {"name": "live"})["trials"]) == 3

    running = writer.ask()
    running.report(0.5, 1)
    body = answer(api, "/api/study", {"name": "live", "from": "3"})
    assert [(row["number"], row["state"]) for row in body["trials"]] == [(3, "RUNNING")]
    writer.tell(running, 0.25)
    body = answer(api, "/api/study", {"name": "live", "from": "4", "refresh": "3"})
    assert [(row["number"], row["state"], row["values"]) for row in body["trials"]] == [
        (3, "COMPLETE", [0.25])
    ]
    assert body["summary"]["best"] == {"numbers": [3], "values": [0.25]}


def test_importance_for_each_objective_and_a_bad_objective(client):
    deadline = time.time() + 30
    for objective in (0, 1):
        body = client.json(f"/api/importance?study={PARETO_STUDY}&objective={objective}")
        while body["status"] != "ready" and time.time() < deadline:
            time.sleep(0.2)
            body = client.json(f"/api/importance?study={PARETO_STUDY}&objective={objective}")
        assert set(body["importances"]) == {"x", "width"}
    status, error = client.get(f"/api/importance?study={PARETO_STUDY}&objective=2")
    assert status == 400 and "out of range" in error["error"]


def test_unknown_names_are_404_with_a_message(client):
    status, body = client.get("/api/study?name=nope")
    assert status == 404 and "no study named 'nope'" in body["error"]
    status, body = client.get("/api/run?id=" + quote(f"{STUDY}/trial-999"))
    assert status == 404
    status, body = client.get("/api/study?name=" + STUDY + "&from=x")
    assert status == 400 and "'from'" in body["error"]
    status, body = client.get("/api/nothing")
    assert status == 404


def test_a_store_that_does_not_exist_yet_reads_as_empty(tmp_path):
    from dashboards.store_reader import StoreReader

    reader = StoreReader(str(tmp_path / "experiments.db"))
    assert reader.runs() == [] and reader.metrics("x") == {} and reader.events("x") == []
    assert not (tmp_path / "experiments.db").exists()  # reading never creates it


def test_a_study_deleted_and_created_again_is_read_afresh(tmp_path):
    """optuna-dashboard (beside ours) can delete a study; a new one of the same name must not show stale trials."""
    from dashboards.optuna_source import OptunaSource

    storage = f"sqlite:///{tmp_path / 'study.db'}"
    optuna.create_study(study_name="s", storage=storage).optimize(
        lambda t: t.suggest_float("x", 0, 1), n_trials=2
    )
    source = OptunaSource(storage)
    assert len(source.trials("s")) == 2
    optuna.delete_study(study_name="s", storage=storage)
    optuna.create_study(study_name="s", storage=storage).optimize(
        lambda t: t.suggest_float("x", 0, 1), n_trials=3
    )
    assert len(source.trials("s")) == 3
    optuna.delete_study(study_name="s", storage=storage)
    assert source.study_names() == [] and source.trials("s") == []
