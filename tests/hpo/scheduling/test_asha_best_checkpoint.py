"""With `objective: best`, a trial's best checkpoint outlives its pauses: a paused trial keeps the checkpoint it
resumes from and its best one, so the trial that completes still has the checkpoint its value was scored at."""

from __future__ import annotations

from pathlib import Path

from optuna.trial import TrialState
from scheduler_support import run_hpo_to_end, trials
from study_task import write_study

ASHA = {
    "type": "asha",
    "min_resource": 4,
    "max_resource": 16,
    "reduction_factor": 2,
    "continue_in_place": False,  # every promotion a pause and a resume
    "promote_underfilled": False,  # the paper's rule: of 4 trials one completes, after pausing at both rungs
}


def test_a_paused_trial_keeps_its_best_checkpoint_until_it_completes(tmp_path):
    write_study(
        tmp_path,
        study={
            "n_trials": 4,
            "scheduler": ASHA,
            "objective": "best",
            "sampler": {"type": "random", "seed": 1},
        },
        task={"compute_metrics": "study_task:compute_peaked_metrics"},
        training={"max_steps": 16},
        resources={"workers": 1},
        callbacks=[{"import": "study_task:StepClock"}],
    )
    run_hpo_to_end(tmp_path, "run")
    complete = [t for t in trials(tmp_path) if t.state == TrialState.COMPLETE]
    assert len(complete) == 1, [(t.number, t.state) for t in trials(tmp_path)]
    best = complete[0]
    assert best.user_attrs["global_step"] == 16 and best.user_attrs["best_step"] == 4
    assert best.value > 1.0  # scored at step 4 (accuracy + 1)
    # It paused at step 4 and at step 8 on its way; its best checkpoint, at step 4, survived both pauses.
    assert best.user_attrs["best_checkpoint"] is not None, best.user_attrs
    assert Path(best.user_attrs["best_checkpoint"]).name == "checkpoint-4"
    assert (Path(best.user_attrs["best_checkpoint"]) / "trainer_state.json").is_file()
