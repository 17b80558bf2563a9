"""One trial: a fresh TrainingArguments object, a seed set before model_init, the trial's identity in the Trainer's
state, its own folder, and the user attributes a user reads afterwards."""

from __future__ import annotations

import gc
import socket
import weakref
from pathlib import Path

import torch
from optuna.trial import TrialState
from study_task import write_study

from hpo.spec import load_study_spec
from hpo.storage.study_db import open_study
from hpo.trial.run import record_outcome, run_trial
from trainer import TrainerCallback


class Observer(TrainerCallback):
    """What each trial's Trainer looked like at train begin (the same instance is passed to both trials on purpose)."""

    def __init__(self) -> None:
        self.seen: list[dict] = []

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.seen.append(
            {
                "args": args,
                "weights": float(sum(p.detach().sum() for p in model.parameters())),
                "trial_name": state.trial_name,
                "trial_params": dict(state.trial_params or {}),
                "search": state.is_hyper_param_search,
            }
        )


def test_each_trial_gets_fresh_arguments_seeded_model_and_identity(tmp_path: Path) -> None:
    spec = load_study_spec(write_study(tmp_path, study={"pruner": {"type": "none"}}))
    defaults = spec.training_arguments().to_dict()
    study = open_study(spec)
    observer = Observer()
    for learning_rate in (0.01, 0.05):
        study.enqueue_trial({"learning_rate": learning_rate})
    for _ in range(2):
        torch.rand(1000)  # draw from the global generator between trials: the seed must not depend on it
        trial = study.ask()
        outcome = run_trial(spec, study, trial, extra_callbacks=[observer])
        record_outcome(study, trial, outcome)
        assert outcome.state == TrialState.COMPLETE, outcome.error

    first, second = observer.seen
    assert first["args"] is not second["args"]
    assert first["args"].output_dir.endswith("trial-0") and second["args"].output_dir.endswith("trial-1")
    assert (first["args"].learning_rate, second["args"].learning_rate) == (0.01, 0.05)
    assert spec.training_arguments().to_dict() == defaults  # the spec's defaults were never mutated
    assert first["weights"] == second["weights"]  # same seed right before model_init: same initial weights
    assert (first["trial_name"], second["trial_name"]) == ("trial-0", "trial-1")
    assert first["trial_params"] == {"learning_rate": 0.01} and first["search"] is True


def test_user_attributes_of_a_completed_trial(tmp_path: Path) -> None:
    spec = load_study_spec(write_study(tmp_path, study={"pruner": {"type": "none"}}))
    study = open_study(spec)
    study.enqueue_trial({"learning_rate": 0.05})
    trial = study.ask()
    outcome = run_trial(spec, study, trial)
    record_outcome(study, trial, outcome)
    frozen = study.trials[0]
    attrs = frozen.user_attrs
    assert frozen.state == TrialState.COMPLETE
    assert frozen.value >= attrs["final_metrics"]["eval_accuracy"]  # the best evaluation, at least the last
    assert attrs["best_step"] in (4, 8, 12)
    assert attrs["best_checkpoint"] == str(Path(attrs["run_dir"]) / f"checkpoint-{attrs['best_step']}")
    assert Path(attrs["best_checkpoint"], "model.safetensors").is_file()
    assert attrs["run_dir"] == str(tmp_path / "out" / "trial-0")
    assert attrs["host"] == socket.gethostname()
    assert attrs["duration_s"] > 0
    assert attrs["error"] is None and attrs["pruned_step"] is None
    assert set(attrs["final_metrics"]) >= {"eval_loss", "eval_accuracy"}


def test_a_resumed_trial_adds_its_training_time_to_the_pieces_before(tmp_path: Path) -> None:
    """A trial resumed after a pause (ASHA, PBT) reports all its training, not its last piece (`hpo status`' time)."""
    spec = load_study_spec(write_study(tmp_path, study={"pruner": {"type": "none"}}))
    study = open_study(spec)
    study.enqueue_trial({"learning_rate": 0.05})
    first = study.ask()
    done = run_trial(spec, study, first)
    record_outcome(study, first, done)
    study.enqueue_trial({"learning_rate": 0.05})
    resumed = study.ask()
    resumed.set_user_attr("duration_s", 100.0)  # what its earlier pieces took, as a paused trial carries it
    outcome = run_trial(spec, study, resumed, resume_from=str(tmp_path / "out" / "trial-0" / "checkpoint-8"))
    assert outcome.state == TrialState.COMPLETE, outcome.error
    assert 100.0 < outcome.user_attrs["duration_s"] < 100.0 + done.user_attrs["duration_s"] + 5
    fresh = study.ask()
    fresh.set_user_attr("duration_s", 100.0)  # not resumed: an attribute from elsewhere is not added
    assert run_trial(spec, study, fresh).user_attrs["duration_s"] < 100.0


class KeepsTheModel(TrainerCallback):
    """A weak reference to each trial's model, taken when training begins."""

    def __init__(self) -> None:
        self.models: list[weakref.ref] = []

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.models.append(weakref.ref(model))


def test_a_finished_trial_leaves_its_model_to_no_one(tmp_path: Path) -> None:
    # What a warm process (a PBT member's) relies on: without the full collection that run_trial skips there, the
    # trial's model, optimizer and Trainer are freed when it returns, before the next trial builds its own.
    spec = load_study_spec(write_study(tmp_path, tracking={"store": True}))
    study = open_study(spec)
    watch = KeepsTheModel()
    gc.collect()
    gc.disable()
    try:
        trial = study.ask()
        outcome = run_trial(spec, study, trial, extra_callbacks=[watch], release_memory=False)
        record_outcome(study, trial, outcome)
        assert outcome.state == TrialState.COMPLETE, outcome.error
        assert watch.models[0]() is None
    finally:
        gc.enable()
