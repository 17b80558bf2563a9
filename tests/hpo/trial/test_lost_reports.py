"""A retry writes the reports an earlier attempt kept through a storage outage and lost when it was killed: they are
in the log history its checkpoint restored (found by the chaos harness: a worker killed during a PostgreSQL outage)."""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from hpo.trial.pruning import OptunaPruningCallback
from trainer import TrainerControl, TrainerState


def history(steps: list[int]) -> list[dict]:
    return [{"step": s, "eval_accuracy": s / 100, "eval_loss": 1.0} for s in steps] + [
        {"step": 3, "loss": 2.0}
    ]


def test_a_retry_writes_the_evaluations_its_chain_never_reported_in_order_before_its_own(tmp_path):
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.db'}", direction="maximize")
    first = study.ask()
    for step in (
        4,
        8,
    ):  # reported; 12 and 16 were kept when the storage went down, then the process was killed
        first.report(step / 100, step)
    study.tell(first, state=TrialState.FAIL)
    retry = study.ask()
    retry.set_user_attr("requeued_from_trial", first.number)
    callback = OptunaPruningCallback(retry, metric="eval_accuracy")
    state = TrainerState(
        global_step=24, log_history=history([4, 8, 12, 16, 20])
    )  # resumed from checkpoint-20

    callback.on_evaluate(None, state, TrainerControl(), metrics={"eval_accuracy": 0.24})

    stored = study.trials[retry.number].intermediate_values
    assert list(stored.items()) == [(12, 0.12), (16, 0.16), (20, 0.2), (24, 0.24)]
    assert callback.kept == []


def test_a_first_attempt_reports_only_what_it_evaluates(tmp_path):
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.db'}", direction="maximize")
    trial = study.ask()
    callback = OptunaPruningCallback(trial, metric="eval_accuracy")
    state = TrainerState(global_step=24, log_history=history([4, 8, 12]))  # a resumed pause: its own history

    callback.on_evaluate(None, state, TrainerControl(), metrics={"eval_accuracy": 0.24})

    assert study.trials[0].intermediate_values == {24: 0.24}
