"""Pausing a trial at a pause point and resuming it from its checkpoint: the weights at the end are bitwise those of the
same configuration trained straight through (the schedule is laid out for the full length from the start)."""

from __future__ import annotations

import safetensors.torch
import torch
from optuna.trial import TrialState
from study_task import write_study

from hpo.spec import load_study_spec
from hpo.storage.study_db import open_study
from hpo.trial.pause import PauseCallback
from hpo.trial.run import run_trial

TRAINING = {"max_steps": 16, "learning_rate": 0.05, "lr_scheduler_type": "linear", "warmup_steps": 2}


def _weights(run_dir) -> dict[str, torch.Tensor]:
    final = max(run_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    assert final.name == "checkpoint-16"
    return safetensors.torch.load_file(final / "model.safetensors")


def test_paused_twice_and_resumed_ends_bitwise_equal_to_a_straight_run(tmp_path):
    spec = load_study_spec(write_study(tmp_path, study={"pruner": {"type": "none"}}, training=TRAINING))
    study = open_study(spec)
    params = {"learning_rate": 0.05}
    assert run_trial(spec, study, _enqueued(study, params)).state == TrialState.COMPLETE  # trial 0: straight
    paused = _enqueued(study, params)  # trial 1: the same configuration, paused at steps 4 and 8
    seen = []
    resume_from = None
    for point in (4, 8):
        callback = PauseCallback([4, 8], "eval_accuracy", lambda p, v: seen.append((p, v)) or True)
        outcome = run_trial(spec, study, paused, resume_from=resume_from, extra_callbacks=[callback])
        assert outcome.state == TrialState.WAITING
        assert outcome.user_attrs["paused_step"] == point
        assert outcome.values is not None and 0 <= outcome.values[0] <= 1
        resume_from = outcome.user_attrs["paused_checkpoint"]
        assert resume_from.endswith(f"checkpoint-{point}")
    final = run_trial(
        spec, study, paused, resume_from=resume_from, extra_callbacks=[PauseCallback([4, 8], "eval_accuracy")]
    )
    assert final.state == TrialState.COMPLETE
    assert [p for p, _ in seen] == [4, 8]
    straight_weights = _weights(tmp_path / "out" / "trial-0")
    paused_weights = _weights(tmp_path / "out" / f"trial-{paused.number}")
    assert straight_weights.keys() == paused_weights.keys()
    for name, tensor in straight_weights.items():
        assert torch.equal(tensor, paused_weights[name]), name


def test_a_point_decided_against_trains_on_without_an_extra_checkpoint(tmp_path):
    training = {**TRAINING, "save_steps": 16, "eval_steps": 16}
    spec = load_study_spec(write_study(tmp_path, study={"pruner": {"type": "none"}}, training=training))
    study = open_study(spec)
    callback = PauseCallback([4, 8], "eval_accuracy", lambda p, v: False)
    outcome = run_trial(spec, study, study.ask(), extra_callbacks=[callback])
    assert outcome.state == TrialState.COMPLETE
    assert [point for point, _, _ in callback.passed] == [4, 8]  # evaluated there, to be judged
    run_dir = tmp_path / "out" / "trial-0"
    assert sorted(p.name for p in run_dir.glob("checkpoint-*")) == ["checkpoint-16"]


def _enqueued(study, params):
    study.enqueue_trial(params)
    return study.ask()
