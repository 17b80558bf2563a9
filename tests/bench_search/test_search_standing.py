"""bench/search/standing.py: issue 36's bar applied to every method against the best of the others, over the
problems of several run folders."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from bench.search.figures import RunFigures
from bench.search.methods import SHIPPED
from bench.search.problems import ROOT
from bench.search.standing import PEERS

SCRIPT = str(ROOT / "bench/search/standing.py")


def timed(q95: float, regret: float, final: float, seeds: int = 20) -> list[RunFigures]:
    return [
        RunFigures({0.9: q95, 0.95: q95, 0.99: math.inf}, {1.0: final}, 1.0, 10, 0, 10, regret)
        for _ in range(seeds)
    ]


def write(
    folder: Path, name: str, q95: dict[str, float], final: dict[str, float], budget_s: float = 100.0
) -> None:
    figures = {m: timed(q95[m], q95[m] / 100, final[m]) for m in q95}
    stored = {
        "problem": name,
        "budget_s": budget_s,
        "regret_scale": [1.0, 0.5],
        "configurations": 300,
        "runs": {m: {"seeds": len(f), "figures": [asdict(r) for r in f]} for m, f in figures.items()},
    }
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(stored))


def standing(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, *arguments], capture_output=True, text=True, check=False)


def test_each_method_is_judged_against_the_best_of_the_others_over_every_folders_problems(tmp_path):
    methods = [SHIPPED, *PEERS]
    slow = dict.fromkeys(methods, 30.0)
    finals = dict.fromkeys(methods, 0.75)
    # p1: hpo 15 s, Ray 10 s: hpo is 1.5x the best of the others, Ray 10 / 15 of its best other
    write(tmp_path / "a", "p1", {**slow, SHIPPED: 15.0, "Ray Tune ASHA": 10.0}, {**finals, SHIPPED: 1.0})
    # p2: hpo first (10 s), TPE 11 s; each method of the same problem in the later folder replaces this one's
    write(tmp_path / "a", "p2", {**slow, SHIPPED: 99.0}, finals)
    write(tmp_path / "b", "p2", {**slow, SHIPPED: 10.0, "TPE": 11.0}, finals)
    done = standing("--runs", str(tmp_path / "a"), str(tmp_path / "b"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Over 2 problems, each method against the best of the other 6")
    ours = next(line for line in lines if line.startswith("| hpo (what ships) | 1.50 |"))
    # regret ranks 2 and 1; over 1.2x on p1 only, the interval (no noise) wholly over; geometric mean of 1.5 and
    # 10 / 11: 1.168; final best 0 on p1, 0.5 on p2
    assert ours == "| hpo (what ships) | 1.50 | 1 of 2 | 1 (p1) | 1.50x (p1) | 1.168 | 0.250 |"
    assert "| p1 | **1.50** | **3.00** | **3.00** | **3.00** | **3.00** | **3.00** | 0.67 |" in lines
    assert "| p2 | 0.91 | **3.00** | 1.10 | **3.00** | **3.00** | **3.00** | **3.00** |" in lines
    only = standing("--runs", str(tmp_path / "b"), "--problems", "p2")
    assert only.stdout.splitlines()[0].startswith("Over 1 problems")


def test_missing_runs_and_unknown_problems_are_one_line_usage_errors(tmp_path):
    write(tmp_path, "p1", {SHIPPED: 10.0, "TPE": 12.0}, {SHIPPED: 0.9, "TPE": 0.9})
    done = standing("--runs", str(tmp_path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        "standing.py: error: --runs: these did not run: random on p1"
    )
    empty = standing("--runs", str(tmp_path / "nothing"))
    assert empty.returncode == 2 and "no problem's runs (*.json)" in empty.stderr
    methods = [SHIPPED, *PEERS]
    write(tmp_path, "p1", dict.fromkeys(methods, 10.0), dict.fromkeys(methods, 0.9))
    unknown = standing("--runs", str(tmp_path), "--problems", "p9")
    assert unknown.returncode == 2 and unknown.stderr.splitlines()[-1].endswith(
        "--problems: no runs of p9 in --runs"
    )


CANDIDATE = "hpo: ranked keep 1/3 (sooner when sure) plain TPE"


def test_a_candidate_run_apart_stands_in_for_what_ships_against_the_same_peers(tmp_path):
    methods = [SHIPPED, *PEERS]
    # what ships and the peers in one folder, the candidate alone in another (a round's selection runs)
    write(
        tmp_path / "peers",
        "p1",
        {**dict.fromkeys(methods, 30.0), SHIPPED: 15.0, "TPE": 10.0},
        dict.fromkeys(methods, 0.75),
    )
    write(tmp_path / "candidate", "p1", {CANDIDATE: 11.0}, {CANDIDATE: 0.75})
    folders = [str(tmp_path / "peers"), str(tmp_path / "candidate")]
    done = standing("--runs", *folders, "--candidate", CANDIDATE)
    assert done.returncode == 0, done.stderr
    # 11 s against TPE's 10 s: 1.10x, under the bar where what ships (15 s) is 1.50x
    assert (
        "| ranked keep 1/3 (sooner when sure) plain TPE | 2.00 | 0 of 1 | 0 | 1.10x (p1) | 1.100 | 0.500 |"
        in done.stdout
    )
    assert "hpo (what ships)" not in done.stdout
    shipped = standing("--runs", *folders)
    assert "| hpo (what ships) | 2.00 | 1 of 1 | 1 (p1) | 1.50x (p1) | 1.500 | 0.500 |" in shipped.stdout


def test_runs_of_one_problem_on_two_budgets_are_refused_in_one_line(tmp_path):
    methods = [SHIPPED, *PEERS]
    write(tmp_path / "a", "p1", dict.fromkeys(methods, 10.0), dict.fromkeys(methods, 0.9))
    write(tmp_path / "b", "p1", {CANDIDATE: 10.0}, {CANDIDATE: 0.9}, budget_s=250.0)
    done = standing("--runs", str(tmp_path / "a"), str(tmp_path / "b"), "--candidate", CANDIDATE)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        "standing.py: error: --runs: p1: runs on two budgets (100 s and 250 s"
    )


def test_fewer_peers_judge_where_the_others_did_not_run(tmp_path):
    # a suite run at the measured costs runs only simulate.py's methods: the peers named are the ones judged against
    write(
        tmp_path,
        "p1",
        {SHIPPED: 15.0, "TPE": 10.0, "random": 12.0},
        dict.fromkeys((SHIPPED, "TPE", "random"), 0.75),
    )
    refused = standing("--runs", str(tmp_path))
    assert refused.returncode == 2 and "Ray Tune ASHA on p1" in refused.stderr
    done = standing("--runs", str(tmp_path), "--peers", "TPE,random")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith(
        "Over 1 problems, each method against the best of the other 2"
    )
    assert "| p1 | **1.50** | 0.83 | 1.20 |" in done.stdout
