"""The suite's judging: the normalised regret over time, held-out selection (a candidate is never judged on a problem
it was chosen on), ranks, and the candidates' rung layouts on the recorded problems."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from dataclasses import asdict

import numpy as np
import pytest

from bench.search import heldout, report, sensitivity, suite
from bench.search.candidates import CURRENT, EXPLORED, PROMOTION_RUNG, at_evaluation, candidates_for
from bench.search.figures import RunFigures, regret_area
from bench.search.methods import NO_PRUNER_NAMED, SHIPPED
from bench.search.problems import DATA, PROBLEMS, RECORDED, ROOT
from bench.search.recording import load
from bench.search.simulate import Costs, budget_of, simulate
from bench.search.suite import methods_of, recorded
from hpo.spec import load_study_spec
from hpo.storage.stop_rungs import StopRungsPruner


def test_the_regret_area_is_one_until_the_first_evaluation_and_zero_at_the_best():
    # best 1.0, reference (median) 0.5; budget 10 s: nothing until 2 s (regret 1), 0.75 (regret 0.5) until 6 s,
    # then 1.0 (regret 0) to the end: (2 * 1 + 4 * 0.5 + 4 * 0) / 10
    area = regret_area(np.array([2.0, 6.0]), np.array([0.75, 1.0]), 10.0, True, (1.0, 0.5))
    assert area == pytest.approx(0.4)
    assert regret_area(np.array([]), np.array([]), 10.0, True, (1.0, 0.5)) == 1.0
    # minimised: a loss of 0.2 against a best of 0.1 and a median of 0.5 is a quarter of the way
    assert regret_area(np.array([0.0]), np.array([0.2]), 4.0, False, (0.1, 0.5)) == pytest.approx(0.25)
    assert math.isnan(regret_area(np.array([0.0]), np.array([1.0]), 4.0, True, (1.0, 1.0)))  # nothing to rank


def runs(regret: float, q95: float, seeds: int = 3) -> list[RunFigures]:
    return [
        RunFigures({0.9: q95, 0.95: q95, 0.99: math.inf}, {1.0: 0.9}, 1.0, 10, 0, 10, regret)
        for _ in range(seeds)
    ]


def problem(peer: float, good: float, bad: float) -> dict[str, list[RunFigures]]:
    return {"peer": runs(peer, 10.0), "A": runs(good, 10.0), "B": runs(bad, 10.0)}


def test_leave_one_out_never_judges_a_candidate_on_the_problem_it_was_chosen_on():
    # A is level with the peer on p1 and p2 and four times behind on p3; B is 1.5x behind everywhere but p3.
    problems = {
        "p1": problem(0.2, 0.2, 0.3),
        "p2": problem(0.2, 0.2, 0.3),
        "p3": problem(0.2, 0.8, 0.2),
    }
    budgets = dict.fromkeys(problems, 100.0)
    chosen = heldout.leave_one_out(problems, budgets, ["A", "B"], ["peer"])
    # without p3, A looks level everywhere and is chosen for p3, where it is worst; with p3 in, B's 1.5x beats A's 4x
    assert chosen == {"p1": "B", "p2": "B", "p3": "A"}
    assert heldout.choose(problems, budgets, ["A", "B"], ["peer"]) == "B"


def test_a_named_pool_replaces_the_rules_candidates_and_must_have_run_everywhere():
    problems = {
        "p1": {"peer": runs(0.2, 10.0), "hpo: A": runs(0.2, 10.0), "hpo: B": runs(0.3, 10.0)},
        "p2": {"peer": runs(0.2, 10.0), "hpo: A": runs(0.2, 10.0)},
    }
    assert report.split(problems)[1] == ["hpo: A"]  # only what ran on every problem
    assert report.split(problems, pool=["hpo: A", "peer"])[1] == ["hpo: A", "peer"]
    with pytest.raises(SystemExit, match="--pool: hpo: B did not run on every problem"):
        report.split(problems, pool=["hpo: A", "hpo: B"])
    # folders without the default before issue 36 (the 400-seed runs) show only what ships and the held-out pick
    assert report.ours_shown(problems) == [report.SHIPPED_LABEL, report.DEFAULT]
    assert report.ours_shown({"p": {CURRENT: runs(0.2, 1.0)}})[0] == report.BEFORE


def test_pick_shares_split_between_equal_candidates_and_go_whole_to_a_clearly_better_one():
    # Each seed's time to q95 varies; A and B have the same seeds' figures (a tie the rule breaks by luck of the
    # draw), C is twice as slow on every seed.
    def spread(scale: float) -> list[RunFigures]:
        return [RunFigures({0.95: scale * t}, {1.0: 0.9}, 1.0, 10, 0, 10, 0.2) for t in range(1, 41)]

    problems = {
        name: {"peer": spread(1.0), "A": spread(1.0), "B": spread(1.0), "C": spread(2.0)}
        for name in ("p1", "p2")
    }
    budgets = dict.fromkeys(problems, 1000.0)
    shares = heldout.pick_shares(problems, budgets, ["A", "B", "C"], ["peer"], draws=100)
    assert shares["C"] == 0.0 and sum(shares.values()) == pytest.approx(1.0)
    assert 0.2 < shares["A"] < 0.8 and 0.2 < shares["B"] < 0.8
    assert heldout.pick_shares(problems, budgets, ["A", "C"], ["peer"], draws=50) == {"A": 1.0, "C": 0.0}


def test_a_missed_target_counts_as_twice_the_budget_and_ties_share_a_rank():
    assert heldout.median_time(runs(0.1, math.inf), 0.95, 50.0) == 100.0
    found = heldout.ranks({"x": runs(0.3, 1.0), "y": runs(0.1, 1.0), "z": runs(0.3, 1.0)}, ["x", "y", "z"])
    assert found == {"x": 2.5, "y": 1.0, "z": 2.5}


@pytest.mark.parametrize("name", RECORDED)
def test_every_candidate_pauses_only_where_the_problem_records_an_evaluation(name):
    problem = PROBLEMS[name]
    recorded = set(problem.rung_steps[:-1])  # a rung at the last evaluation would be the end
    for method in candidates_for(problem):
        if method.pruner is not None:  # stop-type: its first rung is the pruner's min_resource
            assert method.pruner["min_resource"] in recorded, (method.name, method.pruner)
            continue
        if method.adaptive is not None or method.early_ranks is not None:
            continue  # rungs at fractions of the length each trial writes, at its reports (adaptive_rungs.py)
        assert method.levels and set(method.levels) <= recorded, (method.name, method.levels)
        assert list(method.levels) == sorted(set(method.levels))
    assert at_evaluation(problem, 1) == problem.eval_every


# Round 9's pick of the held-out rule at 400 seeds on all 19 problems (docs/search-rounds.md "Round 9"), with round 13's
# early cut where few pairs rank beyond doubt (judged on 28 problems, then on the sixth fresh set: "Round 13") and
# round 17's two thirds kept before the pairs come and between, whatever the start (judged at the costs a real trial
# pays on 37 problems, then on the ninth fresh set; rounds 14 and 15's start rules dropped).
PICK = "hpo: ranked keep 1/3 (sooner when sure; 2/3 until it ranks) plain TPE"


# Every problem, the fresh ones too; minilm-lora's study gives its length in epochs (its rungs come from the length
# each trial writes, as in a real run); a problem made but not yet recorded is left out. Two seeds each: the runs are
# deterministic per seed.
@pytest.mark.parametrize("name", RECORDED)
def test_asha_as_written_runs_the_held_out_pick_seed_for_seed(name):
    # `scheduler: {type: asha}` on each problem's study file, its pruner and sampler built by hpo itself, stops
    # the same trials at the same steps as the candidate the rule picked (stop-type rungs from the first evaluation,
    # each twice as far, the share kept at each from how the rung ranks, Optuna's TPE; bench/search/ranked_keep.py):
    # what ships is what was chosen.
    # At the suite's 0.20 s start (`--start-s 0.2`, what the six-peer standings run).
    recording = load(PROBLEMS[name])
    assert_same_runs(recording, methods_of(name), SHIPPED, PICK, suite_costs(recording))


def suite_costs(recording) -> Costs:
    """The problem's costs with the suite's `--start-s 0.2` (a higher start of its own kept)."""
    return dataclasses.replace(Costs.of(recording), start_s=max(0.2, recording.problem.start_s))


def assert_same_runs(recording, methods, first: str, second: str, costs: Costs | None = None) -> None:
    """The two methods stop the same trials at the same steps, on seeds 0 and 1 (runs are deterministic per seed)."""
    for seed in (0, 1):
        a, b = (
            simulate(recording, methods[m], seed, budget_s=budget_of(recording), costs=costs)
            for m in (first, second)
        )
        assert a.trace == b.trace
        assert [t.done for t in a.trials] == [t.done for t in b.trials]


# Round 15's candidate differs from round 14's pick only where a study's trials start, in their median, for 6
# evaluation intervals or more (round 15's `dear_above`, dropped in round 17). On a problem where no recorded
# configuration does, no median does, so its round 15 selection took what shipped's runs as the candidate's
# (docs/search-rounds.md, "Round 15").
ROUND_14_PICK = (
    "hpo: ranked keep 1/3 (sooner when sure; 1/2 until it ranks where screening is cheaper) plain TPE"
)
ROUND_15_CANDIDATE = (
    "hpo: ranked keep 1/3 (what ships; 7/8 until it ranks where the start is 6+ intervals) plain TPE"
)
NEVER_DEAR = [
    "charlm",
    "fresh3-charsource",
    "fresh4-chardocs",
    "fresh5-charnames",
    "fresh6-chartorch",
    "fresh7-charconst",
    "fresh7-longreg",
    "fresh7-widetab",
    "minilm-lora",
]


@pytest.mark.parametrize("name", NEVER_DEAR)
def test_round_15s_candidate_is_round_14s_pick_where_no_configuration_starts_dearly(name):
    recording = load(PROBLEMS[name], DATA / "dense" / f"{name}.json.gz")  # the suite's recordings
    costs = suite_costs(recording)
    dearest = max((costs.start_s + c.setup_s + c.segment_s[0]) / c.segment_s[1] for c in recording.curves)
    assert dearest < 6
    assert_same_runs(recording, methods_of(name), ROUND_15_CANDIDATE, ROUND_14_PICK, costs)


@pytest.mark.parametrize("name", ["digits", "minilm-lora", "synth-noisy"])
def test_a_study_that_names_no_pruner_runs_the_shipped_rungs_after_two_completed_trials(name):
    # hpo chooses for a file without a pruner: the shipped rungs (same first fraction and eta, built by hpo), but
    # no trial stopped before two have completed; once they have, trials are stopped as under the shipped rungs.
    recording = load(PROBLEMS[name])
    methods = methods_of(name)
    spec = load_study_spec(PROBLEMS[name].study)
    chosen, shipped = methods[NO_PRUNER_NAMED].pruner_object(spec), methods[SHIPPED].pruner_object(spec)
    assert isinstance(chosen, StopRungsPruner) and chosen.startup_trials == 2
    assert (chosen.first_fraction, chosen.reduction_factor, chosen.keep) == (
        shipped.first_fraction,
        shipped.reduction_factor,
        shipped.keep,
    )
    outcome = simulate(recording, methods[NO_PRUNER_NAMED], 0, budget_s=budget_of(recording))
    ended = sorted((t for t in outcome.trials if t.ended_at is not None), key=lambda t: t.ended_at)
    second = [t for t in ended if t.state == "complete"][1].ended_at
    assert all(t.state == "complete" for t in ended if t.ended_at < second)
    assert any(t.state == "pruned" for t in ended if t.ended_at > second)


def test_each_peer_is_measured_against_the_best_of_the_others_and_the_default_against_all():
    # two problems; P and Q trade places (regret 0.2 against 0.3); the default is 0.25 on both
    table = {
        "p1": {"P": runs(0.2, 10.0), "Q": runs(0.3, 10.0), report.DEFAULT: runs(0.25, 10.0)},
        "p2": {"P": runs(0.3, 10.0), "Q": runs(0.2, 10.0), report.DEFAULT: runs(0.25, 10.0)},
    }
    lines = report.envelope_lines(table, {"p1": 100.0, "p2": 100.0}, ["P", "Q"])
    # P is 1.5x behind Q on p2 and level on p1 (ahead on regret, the same time to q95: a ratio is the larger of the
    # two), geometric mean sqrt(1.5); the default is 1.25x behind the better of P and Q on both
    assert lines[2] == "| P | 1.50 | p2 | 1 of 2 | 1.22 |"
    assert lines[4] == f"| {report.DEFAULT} | 1.25 | p1 | 2 of 2 | 1.25 |"


def finals(value: float, seeds: int = 2) -> list[RunFigures]:
    return [RunFigures({}, {1.0: value}, 1.0, 10, 0, 10, 0.5) for _ in range(seeds)]


def test_final_bests_average_over_problems_in_each_problems_own_units():
    # an accuracy (best 0.9, median 0.8) and a loss (best 0.1, median 0.5), each in units of best - median: P ends
    # 0.88 and 0.2 (0.2 and 0.25 of the way to the median, mean 0.225), Q 0.9 and 0.3 (0 and 0.5, mean 0.25), hpo's
    # default 0.85 and 0.1 (0.5 and 0, mean 0.25)
    table = {
        "accuracy": {"P": finals(0.88), "Q": finals(0.9), report.DEFAULT: finals(0.85)},
        "loss": {"P": finals(0.2), "Q": finals(0.3), report.DEFAULT: finals(0.1)},
    }
    scales = {"accuracy": (0.9, 0.8), "loss": (0.1, 0.5)}
    table["loss"]["R"] = finals(0.1)  # a peer run on the loss only has no average: left out
    lines = report.final_lines(table, ["P", "Q", "R", report.DEFAULT], scales, ["P", "Q"])
    assert "the best peer on average: P" in lines[1]
    assert lines[5] == "| P | 0.225 | 0.250 (loss) | 2 of 2 |"
    # a tie at 0.25 keeps the columns' order; the default is no worse than P on the loss only
    assert lines[6:] == [
        "| Q | 0.250 | 0.500 (loss) | 1 of 2 |",
        f"| {report.DEFAULT} | 0.250 | 0.500 (accuracy) | 1 of 2 |",
    ]


def started(trials: list[int]) -> list[RunFigures]:
    return [RunFigures({}, {1.0: 0.9}, 1.0, n, 0, 10, 0.5) for n in trials]


def test_a_method_whose_runs_start_every_recorded_configuration_is_named_with_its_problems():
    # 60 configurations recorded on "small", 300 on "big": P starts 60 or more in 2 runs of 3 on "small" (a run that
    # has started all 60 has surely started the best), never on "big"; Q never exhausts either recording
    table = {
        "small": {"P": started([60, 75, 40]), "Q": started([30, 30, 30])},
        "big": {"P": started([90, 90, 90]), "Q": started([30, 30, 30])},
    }
    lines = report.exhaustion_lines(table, ["P", "Q"], {"small": 60, "big": 300})
    assert lines[-2:] == ["| P | 1 of 2 | small (0.67) |", "| Q | 0 of 2 | none |"]


def test_the_fresh_set_judges_the_pick_made_on_the_suite_not_the_best_candidate_there(tmp_path):
    # On the fresh problem, candidate B is the best method of all; the rule picked A on the suite, so A's figures are
    # the default's there (rank 3 of 5 behind the peers' 0.2 and 0.25; B is not a method of the table), whatever B
    # does.
    figures = {
        "peer": runs(0.2, 10.0, seeds=10),
        "peer 2": runs(0.25, 12.0, seeds=10),
        "hpo: A": runs(0.3, 20.0, seeds=10),
        "hpo: B": runs(0.1, 5.0, seeds=10),
        SHIPPED: runs(0.4, 30.0, seeds=10),
        CURRENT: runs(0.5, 40.0, seeds=10),
    }
    stored = {
        "problem": "fresh-p",
        "budget_s": 100.0,
        "regret_scale": [1.0, 0.5],
        "configurations": 60,  # as suite.py saves it
        "runs": {m: {"seeds": len(f), "figures": [asdict(r) for r in f]} for m, f in figures.items()},
    }
    (tmp_path / "fresh-p.json").write_text(json.dumps(stored))
    lines = report.fresh_lines(tmp_path, "hpo: A", suite_size=13)
    assert "the rule's pick on the suite's 13 problems: A;" in lines[0]
    regret_header = lines[4]
    assert regret_header.split(" | ")[-1] == f"{report.DEFAULT} |"
    fresh_row = lines[6]
    assert fresh_row.endswith("| 0.500 (5) | 0.400 (4) | 0.300 (3) |")  # before, shipped, the pick
    assert "2.00x (peer)" in next(line for line in lines if line.startswith("| fresh-p | 2.00x"))


def test_the_suite_never_reads_the_fresh_set_and_the_fresh_run_reads_only_it():
    # the held-out choice and the suite's tables are made from `recorded()`: a fresh problem in them would let a
    # choice see it; `suite.py --fresh` runs the fresh ones alone, into runs/fresh
    suite_names, fresh_names = recorded(), recorded(fresh=True)
    first_set = {"fresh-diabetes", "fresh-hastie", "fresh-many-classes", "fresh-cnn-optim"}
    second_set = {"fresh2-circles", "fresh2-friedman3"}  # after round 6
    third_set = {"fresh3-quantiles", "fresh3-friedman2", "fresh3-charsource"}  # after round 9 shipped
    fourth_set = {"fresh4-chardocs", "fresh4-swissroll", "fresh4-blobs"}  # after round 11 was stated
    fifth_set = {"fresh5-charnames", "fresh5-imbalanced", "fresh5-scurve"}  # after round 12 was stated
    sixth_set = {"fresh6-chartorch", "fresh6-noisylabels", "fresh6-sparse"}  # after round 13's selection
    seventh_set = {"fresh7-widetab", "fresh7-longreg", "fresh7-charconst"}  # after round 14 was stated
    eighth_set = {"fresh8-spirals", "fresh8-sparselinear", "fresh8-fewrows"}  # after round 15 was stated
    ninth_set = {"fresh9-checker", "fresh9-sinereg", "fresh9-hardclasses"}  # after round 17 was stated
    tenth_set = {"fresh10-parity", "fresh10-tinyeval", "fresh10-pairwise"}  # after round 19 was stated
    recorded_sets = (
        first_set
        | second_set
        | third_set
        | fourth_set
        | fifth_set
        | sixth_set
        | seventh_set
        | eighth_set
        | ninth_set
    )
    # the tenth set is made, recorded one problem at a time: in the fresh runs once its recording exists
    assert recorded_sets <= set(fresh_names) <= recorded_sets | tenth_set
    assert {name for name, problem in PROBLEMS.items() if problem.fresh} == recorded_sets | tenth_set
    assert not set(suite_names) & set(fresh_names)
    assert len(suite_names) == 13 and all(not PROBLEMS[name].fresh for name in suite_names)


def test_the_sensitivity_line_ranks_a_method_beside_the_peers_and_names_its_worst_problem():
    # two problems; every peer at regret 0.3 and q95 10 s but TPE + SH at 0.1 on p1; the pick at 0.2 on both, 15 s to
    # q95 on p2: second on p1 (behind TPE + SH), first on p2; its worst ratio is p1's regret 0.2 / 0.1
    def problem_runs(best_peer_regret: float, pick_q95: float) -> dict[str, list[RunFigures]]:
        runs_by = {m: runs(0.3, 10.0) for m in sensitivity.PEERS}
        runs_by["TPE + SH"] = runs(best_peer_regret, 10.0)
        return runs_by | {"hpo: pick": runs(0.2, pick_q95), PROMOTION_RUNG: runs(0.3, 10.0)}

    problems = {"p1": problem_runs(0.1, 10.0), "p2": problem_runs(0.3, 15.0)}
    text = sensitivity.line("x1", problems, {"p1": 100.0, "p2": 100.0}, "hpo: pick")
    cells = [c.strip() for c in text.strip("|").split("|")]
    assert cells[2] == "1.50 (1 of 9)"  # ranks 2 and 1
    assert cells[4] == "2.00 (p1)" and cells[5] == "2 of 2"  # p2: 15 s against 10 s, 1.5x


def test_rounds_4_5_stay_out_of_the_rules_pool_unless_asked_and_are_shown_beside_what_ships():
    explored = sorted(EXPLORED)[0]
    # the explored candidate is level with the peer; the pool's candidate 1.5x behind
    problems = {
        name: {
            "peer": runs(0.2, 10.0),
            "hpo: A": runs(0.3, 10.0),
            explored: runs(0.2, 10.0),
            SHIPPED: runs(0.3, 10.0),
        }
        for name in ("p1", "p2")
    }
    assert report.split(problems) == (["peer"], ["hpo: A"], [])
    assert report.split(problems, with_explored=True) == (["peer"], ["hpo: A", explored], [])
    lines = report.explored_lines(problems, dict.fromkeys(problems, 100.0), ["peer"])
    assert lines[-2:] == [
        f"| {report.SHIPPED_LABEL} | 1.50 | p1 | 2 of 2 | 1.50 |",
        f"| {explored.removeprefix('hpo: ')} | 1.00 | p1 | 0 of 2 | 1.00 |",
    ]
    assert {m.name for m in candidates_for(PROBLEMS["digits"])}.isdisjoint(EXPLORED)
    assert EXPLORED <= set(methods_of("digits"))  # the suite runs them (--only picks them)


def test_the_time_ratio_interval_is_against_the_fastest_peer_and_spans_the_seeds_noise():
    def timed(times: list[float]) -> list[RunFigures]:
        return [RunFigures({0.9: t, 0.95: t, 0.99: math.inf}, {1.0: 0.9}, 1.0, 10, 0, 10, 0.2) for t in times]

    steady = {"ours": timed([20.0] * 50), "slow": timed([40.0] * 50), "fast": timed([10.0] * 50)}
    assert heldout.time_ratio_interval(steady, "ours", ["slow", "fast"], 100.0) == ("fast", 2.0, 2.0, 2.0)
    rng = np.random.default_rng(1)
    noisy = {"ours": timed(list(rng.uniform(5, 15, 100))), "peer": timed(list(rng.uniform(5, 15, 100)))}
    best, point, low, high = heldout.time_ratio_interval(noisy, "ours", ["peer"], 100.0)
    assert best == "peer" and low < point < high and low < 1.0 < high
    missed = {"ours": timed([math.inf] * 10), "peer": timed([10.0] * 10)}
    assert heldout.time_ratio_interval(missed, "ours", ["peer"], 100.0)[1] == 20.0  # a miss: twice the budget


def test_the_interval_report_needs_only_what_ships_and_some_peers(tmp_path):
    figures = {
        "peer": runs(0.2, 10.0, seeds=40),
        "peer 2": runs(0.2, 12.0, seeds=40),
        SHIPPED: runs(0.3, 15.0, seeds=40),
    }
    stored = {
        "problem": "p",
        "budget_s": 100.0,
        "regret_scale": [1.0, 0.5],
        "configurations": 300,
        "runs": {m: {"seeds": len(f), "figures": [asdict(r) for r in f]} for m, f in figures.items()},
    }
    (tmp_path / "p.json").write_text(json.dumps(stored))
    text = report.intervals(tmp_path)
    assert text.splitlines()[0] == "1 problems, [40] seeds; peers: peer, peer 2"
    assert text.splitlines()[-1] == "| p | peer | 1.50x | 1.50-1.50 | yes, the whole interval |"
    # the full report needs candidates to choose among: without --pool these runs hold none, and it says so
    command = [sys.executable, str(ROOT / "bench/search/report.py"), "--runs", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith("report.py: error: no candidate for the held-out rule")
    assert f"these runs hold {SHIPPED}" in done.stderr and "--pool" in done.stderr


def test_the_measured_costs_give_every_problem_the_measured_start_unless_its_own_is_dearer(monkeypatch):
    # suite.py --report-s 0.010 --save-s 0.010 --start-inside-s 0.032 --between-s 0.012 (trial_costs.py's figures):
    # the tabular and character problems start for 0.044 s, 0.032 s of it after the claim; minilm-lora loads a
    # pretrained model and keeps its own 0.255 s; every problem pays 0.010 s a report and 0.010 s a checkpoint
    monkeypatch.setattr(suite, "PROBLEMS", dict(PROBLEMS))
    suite.charge_reports(0.010, 0.032, 0.012, save_s=0.010)
    digits, minilm = suite.PROBLEMS["digits"], suite.PROBLEMS["minilm-lora"]
    assert (digits.start_s, digits.start_inside_s, digits.report_s) == pytest.approx((0.044, 0.032, 0.010))
    assert (minilm.start_s, minilm.start_inside_s, minilm.save_s) == pytest.approx((0.255, 0.243, 0.010))
    assert PROBLEMS["digits"].report_s == 0.0  # the suite's own problems are untouched
    costs = Costs.of(load(suite.PROBLEMS["digits"]))
    assert costs.start_outside_s == pytest.approx(0.012) and (costs.report_s, costs.save_s) == (0.010, 0.010)
