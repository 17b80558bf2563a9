"""The dashboard's JSON API against real studies (study.db) and a real experiment store (experiments.db)."""

from __future__ import annotations

import time
from collections import Counter
from urllib.parse import quote

import optuna
import pytest
from dashboard_fixtures import IMG_ERROR, PARETO_STUDY, SCRIPT_CHOICE, STUDY, XSS_STUDY, answer


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


def test_study_returns_every_trial_with_params_intermediate_values_and_attrs(client, demo):
    body = client.json(f"/api/study?name={STUDY}")
    trials = {trial.number: trial for trial in demo["study"].get_trials()}
    assert len(body["trials"]) == len(trials)
    for row in body["trials"]:
        trial = trials[row["number"]]
        assert row["state"] == trial.state.name
        assert row["params"] == trial.params
        assert [step for step, _ in row["intermediate"]] == sorted(trial.intermediate_values)
    pruned = [row for row in body["trials"] if row["state"] == "PRUNED"]
    assert pruned, "the fixture study should have pruned trials"
    for row in pruned:  # a pruned trial's curve ends where it was stopped
        assert row["intermediate"][-1][0] == row["user_attrs"]["pruned_step"]
    failed = [row for row in body["trials"] if row["state"] == "FAIL"]
    assert failed[0]["user_attrs"]["error"] == IMG_ERROR  # raw in JSON; the page shows it as text
    activation = next(p for p in body["params"] if p["name"] == "activation")
    assert activation["type"] == "categorical" and SCRIPT_CHOICE in activation["choices"]
    lr = next(p for p in body["params"] if p["name"] == "learning_rate")
    assert lr["log"] is True and lr["type"] == "float"


def test_best_trial_comes_with_its_export_command(client, demo):
    body = client.json(f"/api/study?name={STUDY}")
    best = demo["study"].best_trial.number
    assert body["export"] == {str(best): f"hpo export studies/demo.yaml --out export-trial-{best}"}
    pareto = client.json(f"/api/study?name={PARETO_STUDY}")
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


def test_importance_is_computed_in_the_background_then_ready(client, demo):
    deadline = time.time() + 30
    while True:
        body = client.json(f"/api/importance?study={STUDY}&objective=0")
        if body["status"] == "ready" or time.time() > deadline:
            break
        time.sleep(0.2)
    assert body["status"] == "ready", body
    assert set(body["importances"]) == {"learning_rate", "num_layers", "activation"}
    assert sum(body["importances"].values()) == pytest.approx(1.0)
    status, error = client.get(f"/api/importance?study={PARETO_STUDY}&objective=2")
    assert status == 400 and "out of range" in error["error"]


def test_trial_run_has_every_metric_curve_events_and_checkpoints(client, demo):
    body = client.json("/api/run?id=" + quote(f"{STUDY}/trial-0"))
    assert body["trial"]["number"] == 0 and body["trial"]["state"] == "COMPLETE"
    assert body["study"]["name"] == STUDY
    assert body["study"]["export"] == "hpo export studies/demo.yaml --trial 0 --out export-trial-0"
    assert {
        "loss",
        "eval_loss",
        "eval_accuracy",
        "learning_rate",
        "grad_norm",
        "train_samples_per_second",
    } <= set(body["metrics"])
    loss = body["metrics"]["loss"]
    assert loss["step"] == sorted(loss["step"]) and len(loss["step"]) == len(loss["value"]) == 8
    assert [event["kind"] for event in body["events"]] == ["started", "evaluated"]
    assert body["artifacts"][0]["kind"] == "checkpoint" and body["artifacts"][0]["step"] == 80
    assert body["run"]["arguments"]["max_steps"] == 80  # JSON columns come back decoded


def test_failed_trial_carries_its_error_message(client):
    body = client.json("/api/run?id=" + quote(f"{STUDY}/trial-5"))
    assert body["trial"]["state"] == "FAIL"
    assert body["events"][-1]["message"] == IMG_ERROR


def test_single_runs_are_listed_and_readable(client, demo):
    runs = client.json("/api/runs?kind=run")["runs"]
    assert sorted(run["name"] for run in runs) == ["baseline", "wide <b>lr</b>"]
    body = client.json("/api/run?id=" + quote(runs[0]["id"]))
    assert body["trial"] is None and body["run"]["kind"] == "run"
    assert len(body["metrics"]["loss"]["value"]) == 10


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
