"""The study page's PBT section from a real SQLite study: members' scores by interval, copies, the winning schedule;
and the page itself in headless Chromium (marked browser, as the other page tests)."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from dashboard_fixtures import answer

from dashboards.api import DashboardApi
from dashboards.optuna_source import OptunaSource
from dashboards.population import population
from dashboards.server import start_server
from dashboards.store_reader import StoreReader
from hpo.storage.database import create_storage
from hpo.storage.lineage import MEMBER, Segment, record_segment
from hpo.storage.study_db import storage_of, trial_id

CHROMIUM = "/usr/bin/chromium"


def pbt_study(folder: Path) -> optuna.Study:
    """Two members; member 1 copied member 0 at step 10 with a higher learning rate and ended best."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        storage=create_storage(f"sqlite:///{folder / 'study.db'}"), study_name="pbt", direction="maximize"
    )
    scores = {0: [0.6, 0.8], 1: [0.3, 0.9]}
    for number, lr in ((0, 0.1), (1, 0.001)):
        trial = study.ask()
        trial.set_user_attr(MEMBER, number)
        record_segment(storage_of(study), trial_id(trial), Segment(0, {"learning_rate": lr}))
        if number == 1:  # the weaker member copied member 0 at step 10 and explored
            record_segment(storage_of(study), trial_id(trial), Segment(10, {"learning_rate": 0.12}, source=0))
        for step, score in zip((10, 20), scores[number], strict=True):
            trial.report(score, step)
        trial.set_user_attr("duration_s", 3.5)  # as hpo.trial.run records it: every piece of its training
        study.tell(trial, scores[number][-1])
    return study


def test_population_lists_members_copies_and_the_winning_schedule(tmp_path):
    plain = optuna.create_study(
        storage=create_storage(f"sqlite:///{tmp_path / 'plain.db'}"), study_name="plain"
    )
    plain.tell(plain.ask(), 1.0)
    assert population(plain, plain.get_trials()) is None  # not a PBT study
    study = pbt_study(tmp_path)
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


@pytest.mark.browser
def test_the_study_page_draws_the_population_and_the_winning_schedule(tmp_path):
    from playwright.sync_api import sync_playwright

    pbt_study(tmp_path)
    api = DashboardApi(OptunaSource(f"sqlite:///{tmp_path / 'study.db'}"), StoreReader(None))
    server = start_server(api, "127.0.0.1", 0)
    errors: list[str] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, args=["--headless", "--no-sandbox"]
            )
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.on("console", lambda message: message.type == "error" and errors.append(message.text))
            page.goto(server.url + "/study?name=pbt")
            page.wait_for_selector("body[data-all-plots]", timeout=30_000)
            names = page.evaluate("document.getElementById('plot-population').data.map(t => t.name)")
            jumps = page.evaluate("document.getElementById('plot-population').data.at(-1).text")
            rows = page.locator("#winning-schedule tbody tr").all_inner_texts()
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    assert names == ["member 0", "member 1", "exploit (copy)"]
    assert jumps == ["member 1 copied member 0 at step 10"]
    assert len(rows) == 2 and "learning_rate = 0.12" in rows[1] and "copied member 0" in rows[1]
    assert errors == []


def test_the_trial_table_shows_each_members_current_values_and_whole_training_time(tmp_path):
    pbt_study(tmp_path)
    api = DashboardApi(OptunaSource(f"sqlite:///{tmp_path / 'study.db'}"), StoreReader(None))
    rows = {row["number"]: row for row in answer(api, "/api/study", {"name": "pbt"})["trials"]}
    assert rows[1]["params"] == {"learning_rate": 0.12}  # copied member 0 at step 10, explored: not 0.001
    assert rows[0]["params"] == {"learning_rate": 0.1}
    assert rows[1]["duration"] == 3.5  # its training time, not the span of its last piece (here a few ms)
