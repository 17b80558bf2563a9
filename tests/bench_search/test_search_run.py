"""`python bench/search/run.py`, the command the README's search table comes from: it runs, prints the table and
writes every seed's figures where --json says, one file per problem."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from bench.search import run, suite
from bench.search.problems import PROBLEMS, RECORDED, ROOT


def _script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(ROOT / "bench" / "search" / name), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return _script("run.py", "--seeds", "2", "--only", "random,tpe", *args)


def test_one_problem_writes_its_figures_to_the_json_given(tmp_path):
    out = tmp_path / "digits.json"
    done = _run("--problem", "digits", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "| random |" in done.stdout and "| tpe |" in done.stdout  # the table, a row per method
    figures = json.loads(out.read_text())
    assert figures["problem"] == "digits" and figures["seeds"] == 2
    assert set(figures["runs"]) == {"random", "tpe"} and len(figures["runs"]["tpe"]) == 2
    assert all(
        0 < target <= 1 for target in figures["targets"].values()
    )  # accuracies: the q90, q95, q99 targets


@pytest.mark.slow  # 17 s on 2 cores: run by .ci/run's slow suite
def test_every_problem_gets_its_own_json_beside_the_one_given(tmp_path):
    done = _run("--json", str(tmp_path / "search.json"))
    assert done.returncode == 0, done.stderr
    written = sorted(path.name for path in tmp_path.iterdir())
    # one file per recorded problem; a problem made but not recorded yet gets none
    assert written == sorted(f"search_{name}.json" for name in RECORDED)
    for name in RECORDED:
        assert json.loads((tmp_path / f"search_{name}.json").read_text())["problem"] == name


def test_a_problem_not_recorded_yet_is_refused_with_the_command_that_records_it(
    tmp_path, monkeypatch, capsys
):
    # a fresh set's study files land before its recordings: digits stands in for a problem made, not yet recorded
    monkeypatch.setattr(run, "RECORDED", [name for name in RECORDED if name != "digits"])
    monkeypatch.setattr(sys, "argv", ["run.py", "--problem", "digits", "--json", str(tmp_path / "out.json")])
    with pytest.raises(SystemExit) as exited:
        run.main()
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "--problem digits: not recorded yet (no bench/search/data/digits.json.gz)" in error
    assert "python bench/search/record.py --problem digits" in error
    assert not list(tmp_path.iterdir())


def test_the_suite_refuses_a_method_it_does_not_know_instead_of_running_nothing(tmp_path):
    # a name with a comma is split in two by --only: each half is unknown, and the suite says so before it runs
    only = "TPE,hpo: stop-type rungs from 1/9 (eta 2, random)"
    done = _script("suite.py", "--problems", "digits", "--seeds", "1", "--only", only, "--out", str(tmp_path))
    assert done.returncode == 2
    assert "--only: unknown method(s) ['hpo: stop-type rungs from 1/9 (eta 2', 'random)']" in done.stderr
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.slow  # 14 s on 2 cores: run by .ci/run's slow suite
def test_a_sensitivity_run_scales_every_overhead_into_its_own_folder_only(tmp_path):
    # --overhead-scale 3: each new trial pays three times the start cost, so the study's budget (30 full trials on 2
    # workers, each with its start) grows by 30 * 2 * start_s / 2; into runs/suite it is refused (that folder holds the
    # suite's costs)
    refused = _script(
        "suite.py", "--problems", "breast-cancer", "--seeds", "1", "--only", "random", "--overhead-scale", "3"
    )
    assert refused.returncode == 2 and "--overhead-scale: give the runs their own --out" in refused.stderr
    as_written = _script(
        "suite.py",
        "--problems",
        "breast-cancer",
        "--seeds",
        "1",
        "--only",
        "random",
        "--overhead-scale",
        "3",
        "--out",
        "runs/suite",
    )  # the same folder named relative to the repository, as a user types it
    assert (
        as_written.returncode == 2 and "--overhead-scale: give the runs their own --out" in as_written.stderr
    )
    budgets = {}
    for scale in ("1", "3"):
        out = tmp_path / scale
        args = ("--problems", "breast-cancer", "--seeds", "1", "--only", "random", "--overhead-scale", scale)
        done = _script("suite.py", *args, "--out", str(out))
        assert done.returncode == 0, done.stderr
        budgets[scale] = json.loads((out / "breast-cancer.json").read_text())["budget_s"]
    start_s = PROBLEMS["breast-cancer"].start_s
    assert budgets["3"] - budgets["1"] == pytest.approx(30 * 2 * start_s / 2)


@pytest.mark.slow  # 10 s on 2 cores: run by .ci/run's slow suite
def test_a_measured_start_cost_raises_the_cheaper_problems_and_keeps_the_dearer_ones(tmp_path, monkeypatch):
    # --start-s 0.2 (crosscheck.py's median): breast-cancer simulates 0.086 s a new trial and is raised to 0.2, so its
    # budget (30 full trials on 2 workers, each with its start) grows by 30 * (0.2 - 0.086) / 2; the text problems
    # measured 0.255 s of their own and keep it; into runs/suite it is refused like any change of costs
    refused = _script(
        "suite.py", "--problems", "breast-cancer", "--seeds", "1", "--only", "random", "--start-s", "0.2"
    )
    assert refused.returncode == 2 and "--start-s: give the runs their own --out" in refused.stderr
    budgets = {}
    for label, extra in (("as recorded", ()), ("measured", ("--start-s", "0.2"))):
        out = tmp_path / label.replace(" ", "-")
        args = ("--problems", "breast-cancer", "--seeds", "1", "--only", "random", *extra)
        done = _script("suite.py", *args, "--out", str(out))
        assert done.returncode == 0, done.stderr
        budgets[label] = json.loads((out / "breast-cancer.json").read_text())["budget_s"]
    recorded_start_s = PROBLEMS["breast-cancer"].start_s
    assert budgets["measured"] - budgets["as recorded"] == pytest.approx(30 * (0.2 - recorded_start_s) / 2)

    monkeypatch.setattr(suite, "PROBLEMS", dict(PROBLEMS))
    suite.raise_start_costs(0.2)
    assert suite.PROBLEMS["breast-cancer"].start_s == 0.2
    assert suite.PROBLEMS["minilm-lora"].start_s == PROBLEMS["minilm-lora"].start_s == 0.255


@pytest.mark.slow  # 10 s on 2 cores: run by .ci/run's slow suite
def test_recordings_from_another_folder_replay_there_into_their_own_runs(tmp_path):
    # --data-dir: a denser recording of the same draws (record.py --configurations) lives in its own folder; here one
    # made by keeping breast-cancer's first 20 configurations. The suite runs the problems recorded there and
    # writes how many configurations it replayed; into runs/suite, or from a folder that is not there, it is refused
    stored = json.loads(gzip.open(PROBLEMS["breast-cancer"].data_file, "rt").read())
    folder = tmp_path / "fewer"
    folder.mkdir()
    with gzip.open(folder / "breast-cancer.json.gz", "wt") as out:
        json.dump({**stored, "configurations": stored["configurations"][:20]}, out)
    args = ("--seeds", "1", "--only", "random", "--data-dir", str(folder))
    refused = _script("suite.py", *args)
    assert refused.returncode == 2 and "--data-dir: give the runs their own --out" in refused.stderr
    missing = _script(
        "suite.py", "--seeds", "1", "--data-dir", str(tmp_path / "none"), "--out", str(tmp_path)
    )
    assert missing.returncode == 2 and f"--data-dir: {tmp_path / 'none'} is not a folder" in missing.stderr

    done = _script("suite.py", *args, "--out", str(tmp_path / "runs"))

    assert done.returncode == 0, done.stderr
    assert [path.name for path in (tmp_path / "runs").iterdir()] == ["breast-cancer.json"]
    replayed = json.loads((tmp_path / "runs" / "breast-cancer.json").read_text())
    assert replayed["configurations"] == 20 and len(replayed["runs"]["random"]["figures"]) == 1
