"""The JSON API against a study made by really running `hpo run` (tiny_study.yaml) and a real `hpo train` run."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import optuna
import pytest

HOSTILE = "<script>window.__hacked = 4</script>"
TRAINER_METRICS = {
    "loss",
    "eval_loss",
    "eval_accuracy",
    "learning_rate",
    "grad_norm",
    "train_samples_per_second",
}


def test_overview_counts_trials_by_state_and_names_the_best(real_client, real):
    study: optuna.Study = real["study"]
    body = real_client.json("/api/studies")
    assert body["study_file"].endswith("tiny_study.yaml")
    (summary,) = body["studies"]
    trials = study.get_trials()
    assert summary["name"] == "dash_tiny" and summary["n_trials"] == len(trials) == 6
    assert {state: n for state, n in summary["states"].items() if n} == dict(
        Counter(t.state.name for t in trials)
    )
    assert summary["states"]["FAIL"] == 1 and summary["states"]["PRUNED"] >= 1
    assert summary["directions"] == ["maximize"]
    assert summary["objectives"] == ["eval_accuracy"]  # from the study file's `metric: accuracy`
    assert summary["best"] == {
        "numbers": [study.best_trial.number],
        "values": [pytest.approx(study.best_value)],
    }
    assert summary["running"] == []


def test_study_trials_match_optuna_and_pruned_curves_end_where_pruned(real_client, real):
    body = real_client.json("/api/study?name=dash_tiny")
    trials = {trial.number: trial for trial in real["study"].get_trials()}
    assert sorted(row["number"] for row in body["trials"]) == sorted(trials)
    for row in body["trials"]:
        trial = trials[row["number"]]
        assert row["state"] == trial.state.name and row["params"] == trial.params
        assert dict(row["intermediate"]) == pytest.approx(
            trial.intermediate_values, rel=1e-5
        )  # 6 digits for plots
        assert set(row["user_attrs"]) <= {"slot", "host", "devices", "error", "pruned_step"}
    pruned = [row for row in body["trials"] if row["state"] == "PRUNED"]
    assert pruned and all(row["intermediate"][-1][0] == row["user_attrs"]["pruned_step"] for row in pruned)
    assert trials[2].state == optuna.trial.TrialState.PRUNED  # the enqueued hopeless trial
    slots = {row["user_attrs"]["slot"] for row in body["trials"]}
    assert slots == {"cpu 0"}  # the scheduler's slot, for the timeline
    (failed,) = [row for row in body["trials"] if row["state"] == "FAIL"]
    assert failed["params"]["activation"] == HOSTILE and HOSTILE in failed["user_attrs"]["error"]
    assert "traceback" not in failed["user_attrs"]  # heavy attributes stay on the trial page
    names = {p["name"]: p for p in body["params"]}
    assert names["learning_rate"]["log"] is True and HOSTILE in names["activation"]["choices"]
    best = real["study"].best_trial.number
    assert body["export"] == {str(best): f"hpo export {real['sources'].study_file} --out export-trial-{best}"}


def test_best_trial_page_data_has_every_trainer_curve_events_and_checkpoints(real_client, real):
    best = real["study"].best_trial
    body = real_client.json("/api/run?id=" + quote(f"dash_tiny/trial-{best.number}"))
    assert body["trial"]["values"] == [pytest.approx(best.value)]
    assert body["run"]["status"] == "completed" and body["run"]["kind"] == "trial"
    # Memory peaks in the store's columns and the trial's attributes (no GPU here: the GPU column stays empty).
    assert body["run"]["peak_rss"] == body["trial"]["user_attrs"]["peak_rss"] > 10 << 20
    assert body["run"]["peak_gpu_memory"] is None
    # What the trial trained and what its checkpoint costs on disk, in the store and the trial's attributes.
    attrs = body["trial"]["user_attrs"]
    assert body["run"]["trainable_params"] == attrs["trainable_params"] > 0
    assert body["run"]["checkpoint_bytes"] == attrs["checkpoint_bytes"] > 0
    assert TRAINER_METRICS <= set(body["metrics"])
    loss = body["metrics"]["loss"]
    assert loss["step"] == sorted(loss["step"]) and loss["step"][-1] == 40
    evaluations = body["metrics"]["eval_accuracy"]
    accuracy = dict(zip(evaluations["step"], evaluations["value"], strict=True))
    assert accuracy == pytest.approx(
        best.intermediate_values
    )  # the store and Optuna saw the same evaluations
    kinds = [event["kind"] for event in body["events"]]
    assert kinds[0] == "started" and kinds[-1] == "completed" and kinds.count("evaluated") == 4
    checkpoints = [a for a in body["artifacts"] if a["kind"] == "checkpoint"]
    assert checkpoints and all(len(a["sha256"]) == 64 and a["size"] > 0 for a in checkpoints)
    assert Path(best.user_attrs["best_checkpoint"]).is_dir()
    assert body["study"]["export"].startswith(
        f"hpo export {real['sources'].study_file} --trial {best.number}"
    )


def test_failed_trial_page_data_has_the_error_and_traceback(real_client):
    body = real_client.json("/api/run?id=" + quote("dash_tiny/trial-0"))
    assert body["trial"]["state"] == "FAIL"
    assert "ValueError" in body["trial"]["user_attrs"]["traceback"]
    assert [event["kind"] for event in body["events"]] == ["failed"]
    assert HOSTILE in body["events"][0]["message"]


def test_single_hpo_train_run_is_listed_with_its_curves(real_client):
    runs = real_client.json("/api/runs?kind=run")["runs"]
    assert [run["name"] for run in runs] == ["tiny_digits"]
    assert runs[0]["id"].startswith("run/tiny_digits-") and runs[0]["status"] == "completed"
    body = real_client.json("/api/run?id=" + quote(runs[0]["id"]))
    assert body["trial"] is None and body["run"]["params"]["hidden_size"] == 32
    assert TRAINER_METRICS <= set(body["metrics"])
    assert body["metrics"]["loss"]["step"][-1] == 30


def test_importance_of_the_real_study(real_client):
    deadline = time.time() + 30
    body = real_client.json("/api/importance?study=dash_tiny")
    while body["status"] != "ready" and time.time() < deadline:
        time.sleep(0.2)
        body = real_client.json("/api/importance?study=dash_tiny")
    assert body["status"] == "ready"
    assert set(body["importances"]) == {"learning_rate", "hidden_size", "activation"}
    assert sum(body["importances"].values()) == pytest.approx(1.0)


def test_hpo_report_command_writes_the_real_study(real, tmp_path):
    from dashboard_cli import TINY_STUDY, hpo

    out = tmp_path / "report.html"
    hpo("report", str(TINY_STUDY), "--set", real["overrides"][0], "-o", str(out))
    html = out.read_text(encoding="utf-8")
    assert '"name":"dash_tiny"' in html and HOSTILE not in html  # data inlined, markup escaped


def test_hpo_dashboard_on_the_study_file_opens_its_study_and_store(real):
    import json
    import re
    import subprocess
    import sys
    import urllib.request

    from dashboard_cli import TINY_STUDY

    command = [sys.executable, "-m", "hpo.cli", "dashboard", str(TINY_STUDY), "--set", real["overrides"][0]]
    process = subprocess.Popen(
        [*command, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        first = process.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+)/study\?name=dash_tiny$", first.strip())
        assert match, first + (process.stderr.read() if process.poll() is not None else "")
        assert process.stdout.readline().strip() == f"experiment store: {real['store']}"
        with urllib.request.urlopen(match.group(1) + "/api/runs?kind=run", timeout=30) as response:
            assert [run["name"] for run in json.loads(response.read())["runs"]] == ["tiny_digits"]
    finally:
        process.terminate()
        process.wait(timeout=10)
