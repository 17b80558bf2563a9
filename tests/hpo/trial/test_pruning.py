"""Pruning by callback: a deterministic bad learning rate is pruned at its first evaluation, a good one completes."""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.trial import TrialState
from study_task import write_study

from hpo.study.manager import run_study

GOOD_LR, BAD_LR = 0.05, 1e-5  # eval accuracy at step 4: about 0.80 against 0.51 (the untrained model's)


def test_bad_learning_rate_is_pruned_and_good_one_completes(tmp_path: Path) -> None:
    path = write_study(
        tmp_path,
        study={
            "n_trials": 2,
            "sampler": {"type": "random", "seed": 0},
            "pruner": {"type": "median", "n_startup_trials": 1, "n_warmup_steps": 0},
            "enqueue": [{"learning_rate": GOOD_LR}, {"learning_rate": BAD_LR}],
        },
        search_space={"learning_rate": {"type": "float", "low": 1e-6, "high": 0.1, "log": True}},
    )
    summary = run_study(path, in_process=True)
    study = optuna.load_study(study_name="test", storage=summary.storage)
    good, bad = study.trials
    assert good.state == TrialState.COMPLETE and good.params["learning_rate"] == GOOD_LR
    assert good.value > 0.75
    assert bad.state == TrialState.PRUNED and bad.params["learning_rate"] == BAD_LR
    # Pruned at the first evaluation (global step 4 of 12), and training stopped there instead of running on.
    assert bad.user_attrs["pruned_step"] == 4
    assert bad.user_attrs["global_step"] == 4
    assert list(bad.intermediate_values) == [4]
    assert bad.intermediate_values[4] < 0.6
    # The completed trial reported every evaluation at its global step.
    assert sorted(good.intermediate_values) == [4, 8, 12]
    assert summary.counts == {"COMPLETE": 1, "PRUNED": 1}
    assert summary.best_trial.number == 0


def test_pruned_trial_runs_every_callbacks_train_end(tmp_path: Path) -> None:
    """Stopping through the control lets the Trainer finish: on_train_end fires, so trackers close their runs."""
    from hpo.spec import load_study_spec
    from hpo.storage.study_db import open_study
    from hpo.trial.pruning import OptunaPruningCallback
    from hpo.trial.run import run_trial
    from trainer import TrainerCallback

    class Ends(TrainerCallback):
        def __init__(self) -> None:
            self.ended_at: list[int] = []

        def on_train_end(self, args, state, control, **kwargs):
            self.ended_at.append(state.global_step)

    path = write_study(tmp_path, study={"pruner": {"type": "threshold", "lower": 0.99}})  # always prunes
    spec = load_study_spec(path)
    study = open_study(spec)
    ends = Ends()
    trial = study.ask({"learning_rate": optuna.distributions.FloatDistribution(1e-4, 0.1, log=True)})
    outcome = run_trial(spec, study, trial, extra_callbacks=[ends])
    assert outcome.state == TrialState.PRUNED and outcome.pruned_step == 4
    assert ends.ended_at == [4]
    assert isinstance(OptunaPruningCallback(trial, metric="eval_accuracy"), TrainerCallback)
