"""The multi-fidelity TPE (hpo.storage.rung_sampler): it learns from the values paused and running trials reported
at their rungs, which Optuna's TPE never sees, and its whole state is the study's storage."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from hpo.spec import load_study_spec
from hpo.storage import pause
from hpo.storage.rung_sampler import FINAL, RungTPESampler, model_budget, rung_view
from hpo.storage.study_db import ask_new, ask_queued, build_sampler, trial_id

optuna.logging.set_verbosity(optuna.logging.WARNING)


def paused_study(sampler: optuna.samplers.BaseSampler, good: float) -> optuna.Study:
    """Ten trials paused at their first rung (step 4); the value there peaks at x = `good`."""
    study = optuna.create_study(direction="maximize", sampler=sampler)
    grid = [i / 9 for i in range(10)]
    for x in grid:
        study.enqueue_trial({"x": x})
    for _ in grid:
        trial = ask_queued(study)  # the enqueued point (study.ask() would pop a paused trial)
        assert trial is not None
        x = trial.suggest_float("x", 0.0, 1.0)
        value = -abs(x - good)
        trial.report(value, 4)
        pause.pause_trial(study, trial_id(trial), step=4, checkpoint="c/checkpoint-4", value=value)
    return study


def next_x(study: optuna.Study) -> float:
    return ask_new(study).suggest_float("x", 0.0, 1.0)


def test_a_paused_trials_rung_value_changes_the_next_suggestion():
    def draw(cls: type, good: float) -> float:
        return next_x(paused_study(cls(seed=3, n_startup_trials=5), good))

    # Optuna's TPE sees no finished trial: it draws at random, whatever the paused trials reported.
    assert draw(optuna.samplers.TPESampler, 0.0) == draw(optuna.samplers.TPESampler, 1.0)
    # Ours models the rung values: it draws near the peak the paused trials point to.
    low, high = draw(RungTPESampler, 0.0), draw(RungTPESampler, 1.0)
    assert low < 0.35 < 0.65 < high


def test_the_same_seed_and_storage_draw_the_same_point():
    first = next_x(paused_study(RungTPESampler(seed=5, n_startup_trials=5), 0.3))
    again = next_x(paused_study(RungTPESampler(seed=5, n_startup_trials=5), 0.3))
    assert first == again


def frozen(number: int, state: TrialState, steps: dict[int, float], value: float | None = None):
    trial = optuna.trial.create_trial(
        state=state,
        value=value,
        params={"x": number / 10},
        distributions={"x": optuna.distributions.FloatDistribution(0, 1)},
        intermediate_values=steps,
    )
    trial.number = number
    return trial


def test_the_model_uses_the_highest_budget_with_enough_observations():
    trials = [frozen(i, TrialState.PRUNED, {4: 0.1 * i}) for i in range(4)]
    trials += [frozen(4, TrialState.COMPLETE, {4: 0.5, 12: 0.6}, value=0.7)]
    trials += [frozen(5, TrialState.WAITING, {4: 0.2, 12: 0.3})]
    seen = [{float(k): v for k, v in t.intermediate_values.items()} for t in trials]
    assert model_budget(seen, 2) == 12 and model_budget(seen, 6) == 4 and model_budget(seen, 7) is None
    view = {t.number: t for t in rung_view(trials, min_points=2)}  # budget 12: two trials there
    assert view[4].state == TrialState.COMPLETE and view[4].value == 0.6
    assert view[5].state == TrialState.COMPLETE and view[5].value == 0.3  # paused, seen at its rung
    assert all(view[i].state == TrialState.PRUNED for i in range(4))  # stopped below it
    final = {t.number: t for t in rung_view(trials, min_points=1)}  # one COMPLETE trial: its value at FINAL
    assert final[4].value == 0.7 and final[5].state == TrialState.PRUNED
    assert FINAL > 12


ASHA = {"scheduler": {"type": "asha", "min_resource": 4}}
STOP_ASHA = {"scheduler": {"type": "asha"}}
MEDIAN = {"pruner": {"type": "median"}}
NO_PRUNER = {"pruner": None}


@pytest.mark.parametrize(
    ("sections", "multi_fidelity", "expected"),
    [
        (ASHA, None, RungTPESampler),  # promotion: Optuna's TPE would not see the paused trials
        # Stop-type rungs, as written or for a file that names no pruner (the test task's file names none: null
        # removes it): Optuna's TPE (bench/search, round 9), the multi-fidelity one when asked for.
        (STOP_ASHA, None, optuna.samplers.TPESampler),
        (NO_PRUNER, None, optuna.samplers.TPESampler),
        (STOP_ASHA, True, RungTPESampler),
        (MEDIAN, None, optuna.samplers.TPESampler),
        (MEDIAN, True, RungTPESampler),
        (ASHA, False, optuna.samplers.TPESampler),
    ],
)
def test_the_study_files_tpe_learns_from_rungs_under_promotion_asha_by_default(
    tmp_path, sections, multi_fidelity, expected
):
    from study_task import write_study

    sampler = {"type": "tpe", "seed": 0}
    if multi_fidelity is not None:
        sampler["multi_fidelity"] = multi_fidelity
    spec = load_study_spec(
        write_study(tmp_path, study={"sampler": sampler, **sections}, training={"max_steps": 16})
    )
    assert type(build_sampler(spec)) is expected
