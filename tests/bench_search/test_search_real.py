"""bench/search/real.py runs a method for real: the study file it writes must be the method the simulator runs (the
same sampler and seed on every worker, the same pruner or ASHA rule, the problem's training overrides), with a time
limit instead of n_trials."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.search.methods import methods_for
from bench.search.problems import PROBLEMS
from bench.search.real import START_ALLOWANCE_S, write_study
from hpo.spec import load_study_spec
from hpo.storage.study_db import build_sampler, seed_offset

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("problem_name", ["digits", "minilm-lora"])
def test_the_written_study_runs_the_simulated_method(problem_name, tmp_path):
    problem = PROBLEMS[problem_name]
    spec_of_file = load_study_spec(problem.study)
    for method in methods_for(problem):
        path = write_study(problem, method, 7, tmp_path / method.name, budget_s=20.0)
        spec = load_study_spec(path)  # validates as `hpo run` would
        for worker in range(problem.workers):
            ours = build_sampler(spec, seed_offset=seed_offset(worker, 0))
            simulated = method.sampler_for(spec_of_file, 7, worker)
            assert type(ours) is type(simulated), method.name
            assert ours._rng.rng.randint(1 << 30) == simulated._rng.rng.randint(1 << 30), method.name
        scheduler, pruner = spec.study.scheduler, spec.study.pruner
        if method.asha:
            assert scheduler is not None and scheduler.type == "asha" and not (pruner and pruner.enabled)
            assert scheduler.promote_underfilled == method.underfilled
        elif method.scheduler is not None or method.hpo_chooses:  # what hpo ships: stop-type rungs hpo builds
            assert scheduler is not None and scheduler.mode == "stop" and not (pruner and pruner.enabled)
            assert scheduler.startup_trials == (2 if method.hpo_chooses else 0)
        else:
            assert scheduler is None
            assert pruner is not None and pruner.type == (method.pruner or {"type": "none"})["type"]
        assert spec.study.n_trials is None and spec.study.timeout == 20.0 + START_ALLOWANCE_S
        assert spec.study.enqueue == []
        assert {**spec_of_file.training, **problem.training}.items() <= spec.training.items()


def test_a_method_with_bench_searchs_own_pruner_is_refused_for_real_not_run_without_one():
    # rounds 4-8's candidates stop trials with a pruner no study file section builds: written as a study, they would
    # run unpruned under their name
    done = subprocess.run(
        [
            sys.executable,
            "bench/search/real.py",
            "--problem",
            "breast-cancer",
            "--methods",
            "TPE,hpo: gentle rungs from 1st eval (keep 3/4 x2)",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 2
    assert (
        "--methods: ['hpo: gentle rungs from 1st eval (keep 3/4 x2)'] use bench/search's own" in done.stderr
    )
    typo = subprocess.run(
        [sys.executable, "bench/search/real.py", "--problem", "breast-cancer", "--methods", "TPE + SHH"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert typo.returncode == 2 and "--methods: unknown ['TPE + SHH']" in typo.stderr


@pytest.mark.slow
def test_a_real_run_ends_with_its_medians_against_the_simulators_interval():
    # One real seed of TPE on digits (about a minute), then the agreement table over 20 simulated seeds.
    done = subprocess.run(
        [sys.executable, "bench/search/real.py", "--problem", "digits", "--methods", "tpe", "--seeds", "1"]
        + ["--sim-seeds", "20"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    after = done.stdout.split("against 20 simulated seeds (bench/search/agreement.py):\n")[1].splitlines()
    rows = [line.split(" | ") for line in after if line.startswith("| tpe | to_q")]
    assert [cells[1] for cells in rows] == ["to_q90_s", "to_q95_s"]
    for cells in rows:
        low, high = (float("inf") if end == "-" else float(end) for end in cells[4].split(" to "))
        assert low <= high and cells[6].rstrip(" |") in ("yes", "NO")
