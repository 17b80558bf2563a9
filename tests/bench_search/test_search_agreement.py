"""bench/search/agreement.py judges real runs against the simulator's own spread: the interval a median of n seeds
has among the simulated seeds. It must take a median as real.py does, put a median drawn from the simulated
distribution inside and one from a slower distribution outside, narrow as the seeds grow, and read real.py's files."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

from bench.search.agreement import (
    agreement,
    median_low,
    one_simulated,
    pooled,
    ratio,
    ratio_agreement,
    real_files,
    table,
)
from bench.search.methods import methods_for
from bench.search.problems import PROBLEMS
from bench.search.recording import load
from bench.search.simulate import Costs

ROOT = Path(__file__).resolve().parents[2]


def test_the_median_is_real_pys_lower_middle_with_never_reached_last():
    rng = np.random.default_rng(1)
    for n in (1, 2, 9, 10):
        values = list(rng.exponential(3.0, n))
        values[0] = math.inf
        assert median_low(np.array(values)) == statistics.median_low(values)


def test_a_median_from_the_simulated_distribution_is_inside_and_a_slower_one_is_not():
    rng = np.random.default_rng(2)
    simulated = list(rng.lognormal(1.5, 0.8, 400))
    same = agreement(list(rng.lognormal(1.5, 0.8, 10)), simulated, np.random.default_rng(3))
    assert same.inside and 0.05 <= same.percentile <= 0.95
    assert same.low < same.simulated < same.high
    slower = agreement(list(2.5 * rng.lognormal(1.5, 0.8, 10)), simulated, np.random.default_rng(3))
    assert not slower.inside and slower.percentile > 0.95


def test_the_interval_narrows_as_the_real_seeds_grow():
    simulated = list(np.random.default_rng(4).lognormal(1.5, 0.8, 400))
    ten = agreement([5.0] * 10, simulated, np.random.default_rng(5))
    forty = agreement([5.0] * 40, simulated, np.random.default_rng(5))
    assert forty.high - forty.low < 0.7 * (ten.high - ten.low)


def test_never_reached_counts_as_the_latest_in_a_ratio():
    assert list(
        ratio(np.array([math.inf, 3.0, math.inf, 2.0]), np.array([math.inf, math.inf, 2.0, 4.0]))
    ) == [
        1.0,
        0.0,
        math.inf,
        0.5,
    ]


def test_the_verdict_inverted_for_real_is_outside_the_simulators_interval():
    rng = np.random.default_rng(6)
    fast, slow = list(rng.lognormal(1.0, 0.5, 400)), list(rng.lognormal(2.0, 0.5, 400))
    agrees = ratio_agreement(
        (list(rng.lognormal(1.0, 0.5, 10)), list(rng.lognormal(2.0, 0.5, 10))),
        (fast, slow),
        np.random.default_rng(7),
    )
    assert agrees.inside and agrees.high < 1.0
    inverted = ratio_agreement(
        (list(rng.lognormal(2.0, 0.5, 10)), list(rng.lognormal(1.0, 0.5, 10))),
        (fast, slow),
        np.random.default_rng(7),
    )
    assert not inverted.inside and inverted.real > 1.0


def test_real_pys_files_are_read_renamed_and_pooled(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    row = {"to_q90_s": 1.0, "to_q95_s": math.inf, "trials": 40}
    first.write_text(json.dumps({"hpo: asha as written": [[row, row]], "tpe+sh": [[row, row]]}))
    second.write_text(json.dumps({"hpo: asha as written": [[row, row]], "tpe+sh": [[row, row]]}))
    files = real_files([first, second], {f"{second}:hpo: asha as written": "round 9's"})
    assert [list(runs) for runs in files] == [["hpo: asha as written", "tpe+sh"], ["round 9's", "tpe+sh"]]
    assert {name: len(rows) for name, rows in pooled(files).items()} == {
        "hpo: asha as written": 1,
        "tpe+sh": 2,
        "round 9's": 1,
    }
    assert pooled(files)["tpe+sh"][0]["to_q95_s"] == math.inf


def test_a_run_without_reports_is_read_without_its_pace(tmp_path):
    # real.py writes pace None for a run whose trials report nothing (TPE without a pruner): its figures still count
    path = tmp_path / "real.json"
    row = {"to_q90_s": 2.0, "to_q95_s": 3.0, "factor": 0.92, "pace": None}
    path.write_text(json.dumps({"tpe": [[row, row]]}))
    assert real_files([path], {}) == [{"tpe": [{"to_q90_s": 2.0, "to_q95_s": 3.0, "factor": 0.92}]}]


def test_a_verdict_is_only_between_runs_of_one_file():
    # Two sessions of nearly the same schedule are not paired seed for seed (each real run diverges at its first
    # report); a ratio across files would hold them to the simulator's paired seeds.
    rng = np.random.default_rng(8)
    simulated = {
        name: [{"to_q90_s": v, "to_q95_s": v} for v in rng.lognormal(1.5, 0.8, 50)] for name in "abc"
    }
    real = [{"to_q90_s": 4.0, "to_q95_s": 5.0}] * 10
    lines = table([{"a": real, "b": real}, {"c": real, "b": real}], simulated)
    verdicts = [line.split(" | ")[0].removeprefix("| ") for line in lines if " / " in line]
    assert verdicts == ["a / b", "a / b", "c / b", "c / b"]
    per_method = [line for line in lines if line.startswith("| b | ")]
    assert all(" (20) | " in line for line in per_method)


def test_the_simulators_own_seeds_agree_with_it_and_bad_input_exits_2(tmp_path):
    # The simulated seeds 0-9, written as real.py writes real runs, must sit inside the interval of 40 other seeds
    # (from the same simulator: a check of the command, not of the simulator).
    problem = PROBLEMS["synth-optim"]
    costs = Costs.of(load(problem))
    method = next(m for m in methods_for(problem) if m.name == "tpe+sh")
    rows = [one_simulated(("synth-optim", method, 100 + seed, costs)) for seed in range(10)]
    path = tmp_path / "real.json"
    path.write_text(json.dumps({"tpe+sh": [[r, r] for r in rows]}))
    command = [sys.executable, "bench/search/agreement.py", "--problem", "synth-optim", "--sim-seeds", "40"]
    done = subprocess.run(
        [*command, "--real", str(path)], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("| tpe+sh | to_q")]
    assert len(lines) == 2 and all(line.endswith("| yes |") for line in lines)
    missing = subprocess.run(
        [*command, "--real", str(tmp_path / "none.json")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert missing.returncode == 2 and "--real: no such file" in missing.stderr
    path.write_text(json.dumps({"TPE + SHH": [[rows[0], rows[0]]]}))
    unknown = subprocess.run(
        [*command, "--real", str(path)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert unknown.returncode == 2 and "methods ['TPE + SHH'] are not known on synth-optim" in unknown.stderr
    both = subprocess.run(
        [*command, "--real", str(path), "--start-s", "0.2", "--start-inside-s", "0.03"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert both.returncode == 2 and "--start-s with --start-inside-s" in both.stderr
