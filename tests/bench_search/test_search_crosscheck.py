"""A real `hpo run` against the simulator (bench/search/crosscheck.py): one worker, nine recorded configurations
enqueued in the same order, so both must take the same decisions trial by trial (configuration, state, step)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench.search.problems import ROOT


@pytest.mark.slow
@pytest.mark.parametrize(
    ("method", "trials"),
    [
        ("tpe+asha", 9),
        ("mftpe+asha-underfilled", 9),
        ("mftpe+asha-one-rung", 9),
        (
            "mftpe+asha-gated",
            12,
        ),  # 8 trials run through the closed gate, the next ones are judged (if it opens)
        (
            "mftpe+asha-first-eval",
            9,
        ),  # hpo's default: 2 trials to the end, then judged at the first evaluation
        ("tpe+hyperband", 9),
    ],
)
def test_a_real_hpo_run_takes_the_simulators_decisions(method, trials, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "search" / "crosscheck.py"),
            "--method",
            method,
            "--trials",
            str(trials),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert done.returncode == 0 and "decisions agree" in done.stdout, done.stdout + done.stderr


def test_an_unknown_method_is_refused_naming_it_not_a_traceback():
    done = subprocess.run(
        [sys.executable, "bench/search/crosscheck.py", "--method", "tpe+shh"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--method: unknown 'tpe+shh'; known: " in done.stderr and "tpe+sh" in done.stderr
