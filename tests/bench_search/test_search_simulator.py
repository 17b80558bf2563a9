"""The simulator of bench/search: reproducible, exact on the clock, faithful to the decision code it drives."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from bench.search.methods import Method, methods_for
from bench.search.recording import Recording
from bench.search.simulate import Costs, Simulation, simulate
from hpo.scheduling.asha import hopeless, next_promotion
from hpo.scheduling.promotion import AshaPlan, rung_table
from hpo.scheduling.rank_gate import RankGate
from hpo.storage import pause
from hpo.storage.stop_rungs import EVALUATION_ATTR, FIRST_REPORT_ATTR
from hpo.storage.study_db import ask_new, trial_id

FREE = Costs(start_s=0.0, pause_s=0.0, resume_s=0.0)


def method(recording: Recording, name: str) -> Method:
    return next(m for m in methods_for(recording.problem) if m.name == name)


@pytest.mark.parametrize("name", ["tpe+hyperband", "tpe+sh", "tpe+asha"])
def test_a_seed_gives_the_same_run_every_time(recording, name):
    first, again = (simulate(recording, method(recording, name), seed=4, budget_s=6.0) for _ in range(2))
    assert first.trace == again.trace and first.started == again.started and first.busy_s == again.busy_s
    other = simulate(recording, method(recording, name), seed=5, budget_s=6.0)
    assert other.started != first.started


def test_one_worker_without_pruning_takes_the_sum_of_the_recorded_segments(recording):
    costs = Costs(start_s=0.3, pause_s=0.0, resume_s=0.0)
    outcome = simulate(
        recording, method(recording, "random"), 0, workers=1, budget_s=1e9, n_trials=6, costs=costs
    )
    curves = [recording.curves[c] for c in outcome.started]
    expected = sum(c.setup_s + sum(c.segment_s) + costs.start_s for c in curves)
    assert len(curves) == 6
    assert outcome.end_s == pytest.approx(expected) and outcome.busy_s == pytest.approx(expected)
    assert all(t.state == "complete" and t.done == len(recording.steps) for t in outcome.trials)


@pytest.mark.parametrize("name", ["tpe+sh", "tpe+hyperband"])
def test_a_stop_type_pruner_never_resumes_a_stopped_trial(recording, name):
    outcome = simulate(recording, method(recording, name), 1, budget_s=20.0)
    pruned = [t for t in outcome.trials if t.state == "pruned"]
    assert pruned, "the case should prune something"
    for trial in outcome.trials:
        assert trial.resumes == 0
        if trial.ended_at is not None:
            assert max(trial.evaluated_at) == trial.ended_at  # nothing after it was told
        frozen = trial.trial.study._storage.get_trial(trial_id(trial.trial))  # noqa: SLF001
        assert len(frozen.intermediate_values) == trial.done
    for trial in pruned:
        assert trial.trial.study._storage.get_trial(trial_id(trial.trial)).state == TrialState.PRUNED  # noqa: SLF001


class Checked(Simulation):
    """At every claim, the rung table as hpo would read it from its database (the same trials written with hpo's
    storage functions: boundaries, pause, end) must equal the simulator's, and so must the decisions."""

    checks = 0

    def claim(self, worker: int, at: float) -> bool:
        plan = AshaPlan(tuple(self.levels), self.rec.problem.eta, True, "steps", "eval_accuracy")
        ours = {t.number: t for t in self.table()}
        theirs = {t.number: t for t in rung_table(self.mirror(), plan)}
        assert ours.keys() == theirs.keys()
        for number, entry in ours.items():
            other = theirs[number]
            assert (entry.values, entry.paused, entry.promoted) == (
                other.values,
                other.paused,
                other.promoted,
            )
            assert entry.running == other.running
        arguments = (len(self.levels), plan.eta, True)
        assert next_promotion(list(ours.values()), *arguments) == next_promotion(
            list(theirs.values()), *arguments
        )
        remaining = max(0, (self.n_trials or 0) - len(self.out.trials))
        assert [t.number for t in hopeless(list(ours.values()), plan.eta, True, remaining)] == [
            t.number for t in hopeless(list(theirs.values()), plan.eta, True, remaining)
        ]
        Checked.checks += 1
        return super().claim(worker, at)

    def mirror(self) -> optuna.Study:
        study = optuna.create_study(direction="maximize")
        for sim in self.out.trials:
            trial = ask_new(study)  # study.ask() would pop a paused (WAITING) trial
            number = trial_id(trial)
            for rung, value in sorted(sim.rung.values.items()):
                pause.record_boundary(study, number, self.levels[rung], value)
            step = self.levels[sim.rung.rung] if sim.rung.values else 0
            if sim.state == "paused" or (sim.state == "pruned" and sim.rung.values):
                pause.pause_trial(study, number, step=step, checkpoint=f"x/checkpoint-{step}", value=sim.last)
            if sim.state == "pruned":
                pause.end_paused_trial(study, number, TrialState.PRUNED, sim.rung.values[sim.rung.rung])
            elif sim.state == "complete":
                study.tell(trial, sim.best)
        return study


@pytest.mark.parametrize("n_trials", [None, 12])
def test_the_promotion_rule_in_the_simulator_agrees_with_hpos_on_its_database(recording, n_trials):
    Checked.checks = 0
    asha = method(recording, "random+asha")
    outcome = Checked(recording, asha, 2, 2, 30.0, n_trials, FREE).run()
    assert Checked.checks > 10 and outcome.resumes > 0
    if n_trials is not None:
        assert any(t.state == "pruned" for t in outcome.trials)  # hopeless trials ended on the way


def test_asha_trains_on_in_place_when_the_rule_would_promote_it_at_once(recording):
    costs = Costs(start_s=0.0, pause_s=1.0, resume_s=1.0)
    asha = method(recording, "random+asha")
    outcome = simulate(recording, asha, 3, workers=1, budget_s=1e9, n_trials=9, costs=costs)
    passed_without_pause = [t for t in outcome.trials if t.rung.promoted and t.resumes < len(t.rung.promoted)]
    assert passed_without_pause


def test_a_run_replays_each_recorded_configuration_once_while_any_is_left(recording):
    outcome = simulate(
        recording, method(recording, "tpe"), 0, budget_s=1e9, n_trials=len(recording.curves) + 5
    )
    first = outcome.started[: len(recording.curves)]
    assert sorted(first) == list(range(len(recording.curves)))  # every configuration once, then repeats
    assert len(outcome.started) == len(recording.curves) + 5


def test_the_rank_gate_lets_trials_through_the_rung_until_enough_pairs_rank_alike(recording):
    gated = method(recording, "mftpe+asha-gated")
    assert gated.gate is not None and gated.gate.min_pairs == 8
    outcome = simulate(recording, gated, 0, workers=1, budget_s=1e9, n_trials=20)
    first_eight = outcome.trials[:8]
    assert all(t.state == "complete" and t.resumes == 0 for t in first_eight)  # not judged: no pause, no stop
    closed = Method("closed", "study", asha=True, levels=gated.levels, gate=RankGate(min_pairs=99))
    never = simulate(recording, closed, 0, workers=1, budget_s=1e9, n_trials=20)
    assert all(t.state == "complete" and t.resumes == 0 for t in never.trials)


def test_hyperband_brackets_pause_each_trial_only_at_its_own_brackets_rungs(recording):
    # trial n is in bracket n mod 2: bracket 0 has rungs at steps 1 and 3, bracket 1 at step 3 only
    hedge = Method("hedge", "random", asha=True, underfilled=True, levels=(1,), brackets=((1, 3), (3,)))
    outcome = simulate(recording, hedge, 0, workers=2, budget_s=1e9, n_trials=12, costs=FREE)
    for trial in outcome.trials:
        frozen = trial.trial.study._storage.get_trial(trial_id(trial.trial))  # noqa: SLF001
        judged = sorted(
            frozen.intermediate_values
        )  # a rung reports its value (trial.report), nothing else does
        assert set(judged) <= ({1, 3} if trial.number % 2 == 0 else {3}), (trial.number, judged)
    assert any(
        1 in t.trial.study._storage.get_trial(trial_id(t.trial)).intermediate_values for t in outcome.trials
    )  # noqa: SLF001
    assert {t.state for t in outcome.trials} == {"complete", "pruned"}


def test_a_reported_trial_writes_its_time_to_its_first_report_and_its_evaluation_interval(recording):
    # what round 14's `cheap_keep` reads (bench/search/ranked_keep.py): claim to first report = start + set-up + the
    # first segment; first to second report = the second segment; a trial stopped at its first report has no interval
    costs = Costs(start_s=0.3, pause_s=0.0, resume_s=0.0)
    candidate = Method(
        "round 14", "study", ranked_keep={"high_keep": 1 / 3, "sure": 1.28, "cheap_keep": 1 / 2}
    )
    outcome = simulate(recording, candidate, 2, budget_s=30.0, costs=costs)
    assert len(outcome.trials) > 8 and any(t.done == 1 for t in outcome.trials)
    for trial in (t for t in outcome.trials if t.done):  # the budget may end before a last one's first report
        attrs = trial.trial.study._storage.get_trial(trial_id(trial.trial)).user_attrs  # noqa: SLF001
        curve = recording.curves[trial.config]
        assert attrs[FIRST_REPORT_ATTR] == pytest.approx(costs.start_s + curve.setup_s + curve.segment_s[0])
        if trial.done >= 2:
            assert attrs[EVALUATION_ATTR] == pytest.approx(curve.segment_s[1])
        else:
            assert EVALUATION_ATTR not in attrs


def test_with_report_costs_a_trial_writes_what_a_real_trial_writes_and_pays_each_report(recording):
    # trial_costs.py's model: only start_inside_s of the start falls after the claim, and each report of a method
    # that stops trials costs report_s inside the interval a real trial measures, and on the worker's clock
    costs = Costs(start_s=0.3, pause_s=0.0, resume_s=0.0, report_s=0.05, start_inside_s=0.1)
    candidate = Method(
        "round 14", "study", ranked_keep={"high_keep": 1 / 3, "sure": 1.28, "cheap_keep": 1 / 2}
    )
    outcome = simulate(recording, candidate, 2, budget_s=30.0, costs=costs)
    assert len(outcome.trials) > 8
    for trial in (t for t in outcome.trials if t.done >= 2):
        attrs = trial.trial.study._storage.get_trial(trial_id(trial.trial)).user_attrs  # noqa: SLF001
        curve = recording.curves[trial.config]
        assert attrs[FIRST_REPORT_ATTR] == pytest.approx(0.1 + curve.setup_s + curve.segment_s[0])
        assert attrs[EVALUATION_ATTR] == pytest.approx(curve.segment_s[1] + 0.05)
    # one worker, every trial to its end: each report adds to the wall, a method without a pruner reports nothing
    stopping = Method("no stop, reported", "study", pruner={"type": "none"})
    for name, reports in ((stopping, len(recording.steps)), (method(recording, "random"), 0)):
        run = simulate(recording, name, 0, workers=1, budget_s=1e9, n_trials=4, costs=costs)
        curves = [recording.curves[c] for c in run.started]
        expected = sum(c.setup_s + sum(c.segment_s) + 0.3 + 0.05 * reports for c in curves)
        assert run.end_s == pytest.approx(expected)


def test_every_method_pays_a_checkpoint_at_each_new_best_of_a_trial(recording):
    # save_strategy: best (every recorded problem's study): a checkpoint at each evaluation that improves the trial's
    # best, with or without a pruner; the recordings hold none (record.py trains with save_strategy: no)
    costs = Costs(start_s=0.3, pause_s=0.0, resume_s=0.0, save_s=0.04)

    def new_bests(values: tuple[float, ...]) -> int:
        best, count = None, 0
        for value in values:
            if best is None or recording.better(value, best):
                best, count = value, count + 1
        return count

    for name in (Method("reported", "study", pruner={"type": "none"}), method(recording, "random")):
        run = simulate(recording, name, 0, workers=1, budget_s=1e9, n_trials=4, costs=costs)
        curves = [recording.curves[c] for c in run.started]
        assert all(new_bests(c.values) >= 2 for c in curves)
        expected = sum(c.setup_s + sum(c.segment_s) + 0.3 + 0.04 * new_bests(c.values) for c in curves)
        assert run.end_s == pytest.approx(expected)
