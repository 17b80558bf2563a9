"""`scheduler: {type: asha}` as written: stop-type ASHA (the held-out choice of bench/search), trials stopped at rungs
from their first evaluation, each twice as far, outside the best three quarters, through a pruner; nothing is paused or
resumed."""

from __future__ import annotations

import datetime

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import FrozenTrial, TrialState
from scheduler_support import trials
from study_task import write_study

from hpo.errors import ConfigError
from hpo.spec import load_study_spec
from hpo.storage import pause
from hpo.storage.stop_rungs import (
    EVALUATION_ATTR,
    FIRST_REPORT_ATTR,
    LENGTH_ATTR,
    StopRungsPruner,
    with_earlier_attempts,
)
from hpo.storage.study_db import build_pruner, build_sampler
from hpo.study import run_study
from hpo.study.in_process import check_in_process

STOP = {"type": "asha"}


def stop_study(folder, n_trials: int, **sections):
    study = {"n_trials": n_trials, "scheduler": STOP, "sampler": {"type": "random", "seed": 0}}
    return write_study(
        folder,
        study={**study, "keep_checkpoints": {"top_k": None}, **sections.pop("study", {})},
        training=sections.pop("training", {}),
        resources={"heartbeat_interval": 1, "grace_period": 3},
        **sections,
    )


def test_asha_as_written_stops_trials_at_rungs_from_the_first_evaluation_each_twice_as_far(tmp_path):
    # 36 steps, an evaluation every 4: rungs at 4 (the first evaluation), 8, 16 and 32. The first trial is alone at
    # each rung and runs to the end; later ones outside the share kept at a rung (three quarters until 8 trials have
    # values four times further on) end PRUNED there, and nothing pauses.
    path = stop_study(tmp_path, n_trials=8, training={"max_steps": 36, "eval_steps": 4, "save_steps": 36})
    run_study(path, workers=1, dry_run=False)
    found = sorted(trials(tmp_path), key=lambda t: t.number)
    assert len(found) == 8 and {t.state for t in found} == {TrialState.COMPLETE, TrialState.PRUNED}
    assert found[0].state == TrialState.COMPLETE and found[0].user_attrs["global_step"] == 36
    pruned = [t for t in found if t.state == TrialState.PRUNED]
    assert pruned and {t.user_attrs["pruned_step"] for t in pruned} <= {4, 8, 16, 32}
    for trial in found:
        assert trial.user_attrs[LENGTH_ATTR] == 36
        assert not pause.boundaries(trial) and not trial.system_attrs.get(pause.RESUMED_AT)
        # what it cost to start (stop_rungs.FIRST_REPORT_ATTR, for the benchmarks): from the claim to the first report,
        # then to the second, both within the trial's own run; none stopped at 4 has an interval. (Not which is longer:
        # in-process on a quiet machine the start is about 1.5 intervals, on a loaded one a slow storage write made
        # the interval the longer.)
        to_first, interval = trial.user_attrs[FIRST_REPORT_ATTR], trial.user_attrs.get(EVALUATION_ATTR)
        assert (interval is None) == (trial.user_attrs.get("pruned_step") == 4)
        ran_for = (trial.datetime_complete - trial.datetime_start).total_seconds()
        assert 0 < to_first and (interval is None or 0 < interval)
        assert to_first + (interval or 0) <= ran_for + 0.01
        rungs = sorted(k for k in trial.system_attrs if k.startswith("completed_rung_"))
        assert rungs, "every trial reached the first rung"
    spec = load_study_spec(path)
    assert spec.study.scheduler.mode == "stop" and spec.study.scheduler.reduction_factor == 2
    pruner = build_pruner(spec)
    assert isinstance(pruner, StopRungsPruner) and (pruner.first_fraction, pruner.ranked) == (0, True)
    sampler = build_sampler(
        load_study_spec(stop_study(tmp_path / "tpe", 1, study={"sampler": {"type": "tpe"}}))
    )
    assert (
        type(sampler).__name__ == "TPESampler"
    )  # Optuna's TPE under stop-type rungs (bench/search, round 9)


def test_asha_as_written_stops_an_epochs_based_study_at_epoch_rungs(tmp_path):
    # A study that trains by num_train_epochs (9) and evaluates each epoch: its length in steps is known only once
    # the data is loaded; each trial writes it, and the rungs are the ends of epochs 1, 2, 4 and 8.
    training = {"max_steps": -1, "num_train_epochs": 9, "eval_strategy": "epoch", "save_strategy": "no"}
    run_study(stop_study(tmp_path, n_trials=6, training=training), workers=1, dry_run=False)
    found = trials(tmp_path)
    length = found[0].user_attrs[LENGTH_ATTR]
    epoch = length // 9
    assert length == 9 * epoch and all(t.user_attrs[LENGTH_ATTR] == length for t in found)
    pruned = [t for t in found if t.state == TrialState.PRUNED]
    assert pruned and {t.user_attrs["pruned_step"] for t in pruned} <= {
        epoch,
        2 * epoch,
        4 * epoch,
        8 * epoch,
    }
    assert all(t.user_attrs["global_step"] == length for t in found if t.state == TrialState.COMPLETE)


def test_a_stop_type_study_runs_in_process_where_a_promotion_one_is_refused(tmp_path):
    check_in_process(load_study_spec(stop_study(tmp_path / "stop", 1)))  # nothing to pause: allowed
    promotion = {"scheduler": {"type": "asha", "mode": "promotion"}}
    with pytest.raises(ConfigError, match="pauses trials and resumes them in worker processes"):
        check_in_process(load_study_spec(stop_study(tmp_path / "promotion", 1, study=promotion)))


def _trial(number: int, length: int | None, reports: dict[int, float]) -> FrozenTrial:
    return FrozenTrial(
        number=number,
        state=TrialState.RUNNING,
        value=None,
        datetime_start=datetime.datetime.now(),
        datetime_complete=None,
        params={"x": 0.5},
        distributions={"x": FloatDistribution(0, 1)},
        user_attrs={} if length is None else {LENGTH_ATTR: length},
        system_attrs={},
        intermediate_values=reports,
        trial_id=number,
    )


def test_each_trial_is_judged_at_the_same_fraction_of_its_own_length():
    # A searched batch size gives trials different lengths in steps: 90 and 180 steps, evaluated every tenth.
    pruner = StopRungsPruner(1 / 9, 2)
    assert pruner.first_rung(_trial(0, 90, {9: 0.1, 18: 0.2})) == 18  # first evaluation at or past 10 steps
    assert pruner.first_rung(_trial(1, 180, {18: 0.1, 36: 0.2})) == 36  # past 20
    assert pruner.first_rung(_trial(2, 180, {18: 0.1})) is None  # not there yet
    assert (
        pruner.first_rung(_trial(3, None, {18: 0.1, 36: 0.2})) is None
    )  # length not written yet: no decision


def test_the_pruner_stops_the_worse_half_at_a_rung():
    study = optuna.create_study(direction="maximize", pruner=StopRungsPruner(1 / 9, 2))
    values = [0.9, 0.5, 0.95, 0.1]
    decisions = []
    for value in values:
        trial = study.ask({"x": FloatDistribution(0, 1)})
        trial.set_user_attr(LENGTH_ATTR, 90)
        trial.report(value, 10)
        decisions.append(trial.should_prune())
        study.tell(
            trial,
            state=TrialState.PRUNED if decisions[-1] else TrialState.COMPLETE,
            values=None if decisions[-1] else value,
        )
    # Alone, the first goes on; 0.5 is below the top half of (0.9, 0.5); 0.95 is best; 0.1 is in the bottom half.
    assert decisions == [False, True, False, True]


@pytest.mark.parametrize(
    ("keep", "expected"),
    [
        (None, [False, True, True, True, False, True]),  # 1 / reduction_factor: successive halving's half
        (2 / 3, [False, True, False, True, False, False]),
        (3 / 4, [False, True, False, False, False, False]),  # the default's three quarters
    ],
)
def test_a_rung_keeps_the_share_it_is_given_apart_from_its_spacing(keep, expected):
    # Each trial is judged against those that reached the rung before it: it goes on when it is among the best
    # max(1, floor(n * keep)) of the n there. The third (0.7) is 2nd of 3: out at a half (1 kept), in at 2/3 and
    # 3/4 (2); the fourth (0.6) is 3rd of 4: in only at 3/4 (3 kept); the sixth (0.65) is 4th of 6: out at a half (3
    # kept), in at 2/3 and 3/4 (4). Rung values are recorded whatever the decision, for the trials after.
    study = optuna.create_study(direction="maximize", pruner=StopRungsPruner(0.0, 2, keep=keep))
    decisions = []
    for value in (0.8, 0.5, 0.7, 0.6, 0.9, 0.65):
        trial = _asked(study, {5: value}, ask_at=[])
        decisions.append(trial.should_prune())
        study.tell(trial, *((None, TrialState.PRUNED) if decisions[-1] else (value, TrialState.COMPLETE)))
    assert decisions == expected
    assert [t.system_attrs["completed_rung_0"] for t in study.trials] == [0.8, 0.5, 0.7, 0.6, 0.9, 0.65]


@pytest.mark.parametrize("start", [3.0, 8.0])
@pytest.mark.parametrize(("value", "stopped"), [(0.35, True), (0.45, False)])
def test_a_few_pairs_in_perfect_order_cut_to_a_third_whatever_the_trials_start(start, value, stopped):
    # Five trials whose values at the first rung (step 10) rank their values four times further on (step 40)
    # perfectly: fewer pairs than the plain rule needs (8) but beyond doubt, so the rung cuts to a third (RANKED_SURE):
    # 2 of 6 go on, 0.45 (2nd) but not 0.35 (3rd). Round 15 kept seven eighths and took no such cut where each trial
    # took 6 evaluation intervals or more from its claim to its first report (8 here); round 17 dropped that rule.
    study = optuna.create_study(direction="maximize", pruner=StopRungsPruner(0.0, 2, ranked=True))
    timing = {FIRST_REPORT_ATTR: start, EVALUATION_ATTR: 1.0}
    for early in (0.1, 0.2, 0.3, 0.4, 0.5):
        trial = _asked(study, {10: early, 40: early + 0.3}, ask_at=[10, 40], **timing)
        study.tell(trial, early + 0.3)
    sixth = _asked(study, {10: value}, ask_at=[], **timing)
    assert sixth.should_prune() is stopped


def test_the_first_rung_at_fraction_zero_is_each_trials_first_evaluation():
    pruner = StopRungsPruner(0.0, 2)
    assert pruner.first_rung(_trial(0, 90, {5: 0.1, 10: 0.2})) == 5
    assert pruner.first_rung(_trial(1, 180, {18: 0.1})) == 18
    with pytest.raises(ValueError, match="keep must be in"):
        StopRungsPruner(0.0, 2, keep=1.0)


def _asked(study: optuna.Study, reports: dict[int, float], ask_at: list[int], **attrs) -> optuna.Trial:
    """A trial of length 90 (first rung at step 10, then 20, 40, 80) that reports `reports` and asks the pruner
    only after the steps in `ask_at` (a report written late, as after an outage, is never asked at)."""
    trial = study.ask({"x": FloatDistribution(0, 1)})
    trial.set_user_attr(LENGTH_ATTR, 90)
    for name, value in attrs.items():
        trial.set_user_attr(name, value)
    for step, value in sorted(reports.items()):
        trial.report(value, step)
        if step in ask_at and trial.should_prune():
            study.tell(trial, state=TrialState.PRUNED)
            return trial
    return trial


def test_a_rung_is_judged_with_the_value_at_the_rung_when_the_pruner_is_asked_late():
    # Reports kept through an outage reach the storage together; the pruner is first asked at step 20. The trial
    # was 0.5 at the rung (step 10), below the first trial's 0.9: pruned, though its later 0.95 would have passed.
    study = optuna.create_study(direction="maximize", pruner=StopRungsPruner(1 / 9, 2))
    first = _asked(study, {10: 0.9}, ask_at=[10])
    study.tell(first, 0.9)
    late = _asked(study, {10: 0.5, 20: 0.95}, ask_at=[20])
    frozen = study.trials[late.number]
    assert frozen.state == TrialState.PRUNED
    assert frozen.system_attrs["completed_rung_0"] == 0.5


def test_a_retry_is_judged_at_its_earlier_attempts_rungs_and_not_twice_at_a_passed_one():
    # Trial 0 was 0.96 at step 10 and 0.9 at 20. Trial 1 passed the rung at 10 (0.97), then crashed; its retry
    # resumed from a checkpoint and reports from step 30 only. The retry's rungs are trial 1's (10, 20, 40): the one
    # at 10 was passed, the one at 20 is judged with its first report past it (0.95 against 0.9): it goes on. Judged
    # as a trial of its own, its first rung would be step 30, against the rung-10 values (0.96, 0.97): pruned.
    study = optuna.create_study(direction="maximize", pruner=StopRungsPruner(1 / 9, 2))
    leader = _asked(study, {10: 0.96, 20: 0.9}, ask_at=[10, 20])
    study.tell(leader, 0.9)
    crashed = _asked(study, {10: 0.97}, ask_at=[10])
    study.tell(crashed, state=TrialState.FAIL)
    retry = _asked(study, {30: 0.95}, ask_at=[30], requeued_from_trial=crashed.number)
    frozen = study.trials[retry.number]
    assert frozen.state == TrialState.RUNNING
    assert "completed_rung_0" not in frozen.system_attrs and frozen.system_attrs["completed_rung_1"] == 0.95
    assert StopRungsPruner(1 / 9, 2).first_rung(with_earlier_attempts(study, frozen)) == 10


@pytest.mark.parametrize(("startup", "expected"), [(0, [False, True, True]), (2, [False, False, True])])
def test_no_trial_stops_before_the_startup_trials_have_completed(startup, expected):
    # What a study that names no pruner gets (startup 2): the second trial, below the first at the rung, trains to
    # the end; its rung value still counts against the third, which stops.
    study = optuna.create_study(direction="maximize", pruner=StopRungsPruner(1 / 9, 2, startup))
    decisions = []
    for value in (0.9, 0.5, 0.4):
        trial = _asked(study, {10: value}, ask_at=[])
        decisions.append(trial.should_prune())
        study.tell(trial, *((None, TrialState.PRUNED) if decisions[-1] else (value, TrialState.COMPLETE)))
    assert decisions == expected
    assert study.trials[1].system_attrs["completed_rung_0"] == 0.5
