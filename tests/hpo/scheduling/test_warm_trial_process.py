"""On the CPU a worker's trial process takes the worker's next trial once it has sent its result
(`resources.fresh_process_per_trial: false`, the default): the trials score exactly as they do in new processes, a crash
costs one trial and the next gets a new process, and `fresh_process_per_trial: true` gives every trial its own."""

from __future__ import annotations

import os

import pytest
from optuna.trial import TrialState
from scheduler_support import run_hpo_to_end, trials
from study_task import write_study

from hpo.study.manager import run_study

SPACE = {
    "learning_rate": {"type": "float", "low": 1.0e-3, "high": 0.1, "log": True},
    "hidden": {"type": "int", "low": 8, "high": 64, "target": "model"},
    "dropout": {"type": "float", "low": 0.0, "high": 0.5, "target": "model"},
}


def _study(folder, **resources):
    return write_study(
        folder,
        study={"sampler": {"type": "random", "seed": 3}},
        search_space=SPACE,
        training={"max_steps": 16, "save_strategy": "no"},
        resources={"workers": 1, **resources},
    )


def _by_number(folder):
    return sorted(trials(folder), key=lambda t: t.number)


@pytest.mark.slow  # 10 s on 2 cores: run by .ci/run's slow suite
def test_trials_in_the_warm_process_score_as_in_new_processes(tmp_path):
    run_study(_study(tmp_path / "warm"), n_trials=4)
    run_study(_study(tmp_path / "fresh", fresh_process_per_trial=True), n_trials=4)
    warm, fresh = _by_number(tmp_path / "warm"), _by_number(tmp_path / "fresh")

    assert [t.params for t in warm] == [t.params for t in fresh]
    # Dropout draws, data order and initial weights are seeded per trial: nothing carries over between trials.
    assert [t.value for t in warm] == [t.value for t in fresh]
    assert [t.intermediate_values for t in warm] == [t.intermediate_values for t in fresh]
    warm_pids = {t.user_attrs["pid"] for t in warm}
    assert len(warm_pids) == 1 and os.getpid() not in warm_pids  # one trial process for the worker's 4 trials
    assert len({t.user_attrs["pid"] for t in fresh}) == 4  # a new process each


def test_a_trial_that_kills_its_process_costs_that_trial_alone(tmp_path):
    write_study(
        tmp_path,
        study={"n_trials": 4, "sampler": {"type": "random", "seed": 1}},
        training={"max_steps": 12},
        resources={"workers": 1, "heartbeat_interval": 1, "grace_period": 3},
        callbacks=[
            {
                "import": "study_task:KillOnceAfterSave",
                "args": {"step": 8, "marker": str(tmp_path / "killed")},
            }
        ],
    )
    run_hpo_to_end(tmp_path, "run", timeout=240)

    killed_pid = int((tmp_path / "killed").read_text().split()[0])
    found = trials(tmp_path)
    assert [t.state for t in found if t.user_attrs.get("requeued")] == [TrialState.FAIL]
    finished = [t for t in found if not t.user_attrs.get("requeued")]
    assert len(finished) == 4 and all(t.state == TrialState.COMPLETE for t in finished)
    # The trial after the crash runs in a new process, which then serves the rest.
    pids = {t.user_attrs["pid"] for t in finished}
    assert killed_pid not in pids and len(pids) == 1
