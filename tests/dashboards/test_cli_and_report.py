"""`hpo dashboard` and `hpo report` from the command line, and the static report's self-containment."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request

import pytest
from dashboard_fixtures import IMG_ERROR, SCRIPT_CHOICE, STUDY

from dashboards.api import DashboardApi
from dashboards.optuna_source import OptunaSource
from dashboards.report import write_report
from dashboards.store_reader import StoreReader

HPO = [sys.executable, "-m", "hpo.cli"]


def run_hpo(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*HPO, *args], capture_output=True, text=True, timeout=timeout)


def test_dashboard_serves_on_loopback_by_default(demo):
    process = subprocess.Popen(
        [*HPO, "dashboard", "--storage", demo["storage"], "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+)/", line)
        assert match, line + process.stderr.read() if process.poll() is not None else line
        with urllib.request.urlopen(match.group(1) + "/api/studies", timeout=30) as response:
            body = json.loads(response.read())
        assert STUDY in [study["name"] for study in body["studies"]]
        assert (
            process.stdout.readline().strip() == f"experiment store: {demo['store']}"
        )  # found beside study.db
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_dashboard_without_a_source_is_a_usage_error():
    result = run_hpo("dashboard")
    assert result.returncode == 2
    assert "give a study file" in result.stderr and "Traceback" not in result.stderr


def test_dashboard_on_a_missing_database_says_so_and_creates_nothing(tmp_path):
    missing = tmp_path / "study.db"
    result = run_hpo("dashboard", "--storage", f"sqlite:///{missing}", "--port", "0")
    assert result.returncode == 1
    assert "no study database at" in result.stderr and "Traceback" not in result.stderr
    assert not missing.exists()


def test_report_of_a_missing_study_file_is_a_usage_error(tmp_path):
    result = run_hpo("report", str(tmp_path / "nope.yaml"), "-o", str(tmp_path / "r.html"))
    assert result.returncode == 2 and "no such study" in result.stderr
    assert not (tmp_path / "r.html").exists()


def test_report_is_one_self_contained_file_with_escaped_data(demo, tmp_path):
    api = DashboardApi(
        OptunaSource(demo["storage"]), StoreReader(demo["store"]), study_file="studies/demo.yaml"
    )
    out = write_report(api, STUDY, tmp_path / "nested" / "report.html")
    html = out.read_text(encoding="utf-8")
    assert "Plotly" in html and "StudyView" in html  # Plotly's bundle and the page scripts are inlined
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", html)  # nothing loaded from elsewhere
    assert "connect-src 'none'" in html
    # Study strings are inside JSON with < > & escaped: they can neither end the script nor open a tag.
    assert SCRIPT_CHOICE not in html and IMG_ERROR not in html
    data = json.loads(re.search(r'id="hpo-report-data">(.*?)</script>', html, re.S).group(1))
    trials = data["api"]["/api/study"][0][1]["trials"]
    assert len(trials) == len(demo["study"].get_trials())
    assert any(trial["params"].get("activation") == SCRIPT_CHOICE for trial in trials)
    assert data["runs"] == [f"{STUDY}/trial-{demo['study'].best_trial.number}"]
    assert not list(out.parent.glob("*.tmp"))  # written atomically
    # Readable by others, as any file the user writes (under umask 022), not owner-only like a temporary file.
    assert out.stat().st_mode & 0o044 == 0o044


def test_report_of_an_unknown_study_names_it(demo, tmp_path):
    from hpo.errors import HpoError

    api = DashboardApi(OptunaSource(demo["storage"]), StoreReader(None))
    with pytest.raises(HpoError, match="no study named 'other'"):
        write_report(api, "other", tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()
