"""Markup in every study string the dashboard shows (the study's name, a parameter's name and its values, a metric
name, a user attribute) reaches the browser escaped: the API's JSON writes `<`, `>` and `&` as \\u escapes, the pages
carry no study data, the static report inlines the data escaped, and no script assigns study data as HTML. (The
browser tests check what a real browser then draws; these check the bytes, without one.)"""

from __future__ import annotations

import gzip
import json
import re
import urllib.request
from pathlib import Path
from urllib.parse import quote

import optuna
import pytest

from dashboards.api import DashboardApi
from dashboards.optuna_source import OptunaSource
from dashboards.report import render_report, report_data
from dashboards.server import STATIC_DIR, start_server
from dashboards.store_reader import StoreReader

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
STUDY = f"study {SCRIPT}"
PARAM = f"lr {IMG}"
METRIC = f"acc {SCRIPT}"
pytestmark = pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")  # set_metric_names
RAW = [SCRIPT, "<script>alert", "<img", "onerror=alert(1)>"]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("hostile-dashboard")
    storage = f"sqlite:///{folder / 'study.db'}"
    study = optuna.create_study(
        study_name=STUDY, storage=storage, sampler=optuna.samplers.RandomSampler(seed=0)
    )
    study.set_metric_names([METRIC])

    def objective(trial: optuna.Trial) -> float:
        trial.set_user_attr("note", IMG)
        choice = trial.suggest_categorical("choice", [SCRIPT, IMG, "plain"])
        for step in range(3):
            trial.report(step * 0.1, step)
        return trial.suggest_float(PARAM, 0.0, 1.0) + (choice == "plain")

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study.optimize(objective, n_trials=4)
    api = DashboardApi(OptunaSource(storage), StoreReader(str(folder / "experiments.db")))
    server = start_server(api, "127.0.0.1", 0)
    yield {"api": api, "url": server.url}
    server.shutdown()
    server.server_close()


def fetch(url: str) -> tuple[bytes, dict[str, str]]:
    with urllib.request.urlopen(url, timeout=30) as response:
        body = response.read()
        if response.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        return body, dict(response.headers)


def strings(value) -> set[str]:
    """Every key and string value in a decoded JSON document."""
    if isinstance(value, dict):
        return set(value) | {s for item in value.values() for s in strings(item)}
    if isinstance(value, list):
        return {s for item in value for s in strings(item)}
    return {value} if isinstance(value, str) else set()


def assert_holds_every_hostile_string(document) -> None:
    found = strings(document)
    for text in (STUDY, PARAM, METRIC, SCRIPT, IMG):
        assert text in found, text


def assert_no_markup(text: str) -> None:
    for raw in RAW:
        assert raw not in text, raw


@pytest.mark.parametrize(
    "path",
    ["/api/studies", f"/api/study?name={quote(STUDY)}", f"/api/run?id={quote(STUDY + '/trial-0')}"],
)
def test_the_api_returns_every_string_intact_but_never_as_markup(hostile, path):
    body, headers = fetch(hostile["url"] + path)
    assert (
        headers["Content-Type"].startswith("application/json")
        and headers["X-Content-Type-Options"] == "nosniff"
    )
    text = body.decode("utf-8")
    assert_no_markup(text)
    assert "\\u003cscript\\u003e" in text  # the escaped form: the same JSON string
    assert STUDY in json.dumps(
        json.loads(text), ensure_ascii=False
    )  # and it decodes back to the study's strings


def test_the_study_answer_holds_each_hostile_string(hostile):
    body, _ = fetch(hostile["url"] + f"/api/study?name={quote(STUDY)}")
    assert_holds_every_hostile_string(json.loads(body))


@pytest.mark.parametrize(
    "path", ["/", f"/study?name={quote(STUDY)}", f"/run?id={quote(STUDY + '/trial-0')}", "/compare"]
)
def test_pages_never_echo_study_strings(hostile, path):
    body, headers = fetch(hostile["url"] + path)
    assert headers["Content-Type"].startswith("text/html")
    assert_no_markup(body.decode("utf-8"))
    assert "alert(1)" not in body.decode("utf-8")


def test_the_report_inlines_the_strings_escaped(hostile):
    html = render_report(report_data(hostile["api"], STUDY))
    data_text = re.search(r'id="hpo-report-data">(.*?)</script>', html, re.S).group(1)
    assert_no_markup(data_text)
    assert "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" in data_text
    assert "onerror=alert(1)\\u003e" in data_text
    assert_holds_every_hostile_string(json.loads(data_text))
    title = re.search(r"<title>(.*?)</title>", html, re.S).group(1)
    assert title == "study &lt;script&gt;alert(1)&lt;/script&gt; · hpo report"
    assert "alert(1)" not in html.replace(data_text, "").replace(title, "")  # nowhere else


def test_no_dashboard_script_assigns_html():
    """Study strings reach the page as text nodes (HPO.h) or Plotly data escaped by HPO.plotText; never as HTML."""
    sinks = re.compile(r"\.innerHTML|\.outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function\(")
    offenders = [
        f"{path.name}:{number}"
        for path in sorted(Path(STATIC_DIR).glob("*.js"))
        if path.name != "plotly.min.js"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if sinks.search(line) and not line.lstrip().startswith("//")
    ]
    assert not offenders, offenders
