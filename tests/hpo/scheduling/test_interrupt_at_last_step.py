"""A stop that reaches a trial during its last step does not cost a retry: training ends there anyway, so the trial
is scored and ends COMPLETE, where it used to end FAIL ("interrupted at step 40") with a retry queued that trained
nothing."""

from __future__ import annotations

from pathlib import Path

from optuna.trial import TrialState
from scheduler_support import MAX_STEPS, run_hpo_to_end, slow_study, trials


def test_a_trial_stopped_during_its_last_step_completes_without_a_retry(tmp_path):
    folder = tmp_path / "study"
    slow_study(
        folder,
        delay=0.0,
        study={"n_trials": 1},
        callbacks=[{"import": "study_task:TermDuringLastStep"}],
    )
    run_hpo_to_end(folder, "run")
    [trial] = trials(folder)
    assert trial.state == TrialState.COMPLETE, trial.user_attrs
    assert "interrupted" not in trial.user_attrs
    assert trial.user_attrs["best_step"] <= MAX_STEPS
    assert Path(trial.user_attrs["best_checkpoint"]).is_dir()  # its model is there to export
