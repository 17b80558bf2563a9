"""Callbacks written for transformers' Trainer work here: stateful callbacks in its documented form, the control
saved and restored, the end-of-training evaluation of transformers 5, fractional intervals, handler API."""

from __future__ import annotations

import json
import logging

from trainer_tasks import Regression, make_model, quiet_args

from trainer import (
    DefaultFlowCallback,
    ExportableState,
    Trainer,
    TrainerCallback,
    TrainerControl,
    TrainerState,
)
from trainer.callbacks import CallbackHandler


class Marker(TrainerCallback, ExportableState):
    """A stateful callback exactly as transformers documents one: only state(), restored by re-creation."""

    def __init__(self, label: str = "default") -> None:
        self.label = label
        self.seen = 0

    def on_step_end(self, args, state, control, **kwargs):
        self.seen += 1

    def state(self) -> dict:
        return {"args": {"label": self.label}, "attributes": {"seen": self.seen}}


class Steps(TrainerCallback):
    def __init__(self) -> None:
        self.evaluated_at: list[int] = []

    def on_evaluate(self, args, state, control, **kwargs):
        self.evaluated_at.append(state.global_step)


def make_trainer(tmp_path, callbacks=(), **fields) -> Trainer:
    return Trainer(
        model=make_model(),
        args=quiet_args(tmp_path, **fields),
        train_dataset=Regression(64),
        eval_dataset=Regression(16),
        callbacks=list(callbacks),
    )


def test_two_instances_of_a_documented_stateful_callback_are_both_saved_and_recreated(tmp_path):
    first = make_trainer(
        tmp_path, [Marker("a"), Marker("b")], max_steps=3, save_strategy="steps", save_steps=3
    )
    first.train()
    saved = json.loads((tmp_path / "checkpoint-3" / "trainer_state.json").read_text())["stateful_callbacks"]
    assert saved["Marker"] == [
        {"args": {"label": "a"}, "attributes": {"seen": 3}},
        {"args": {"label": "b"}, "attributes": {"seen": 3}},
    ]
    assert saved["TrainerControl"]["args"]["should_training_stop"] is True

    resumed = make_trainer(
        tmp_path, [Marker(), Marker()], max_steps=5, restore_callback_states_from_checkpoint=True
    )
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-3"))
    markers = [cb for cb in resumed.callback_handler.callbacks if isinstance(cb, Marker)]
    assert [(m.label, m.seen) for m in markers] == [("a", 5), ("b", 5)]  # re-created, then counted on
    assert resumed.state.global_step == 5  # the saved stop flag did not end the resumed run


def test_without_the_flag_saved_attributes_come_back_and_constructor_arguments_stay(tmp_path):
    make_trainer(tmp_path, [Marker("a")], max_steps=2, save_strategy="steps", save_steps=2).train()
    mine = Marker("mine")
    resumed = make_trainer(tmp_path, [mine], max_steps=3)
    resumed.train(resume_from_checkpoint=True)
    assert (mine.label, mine.seen) == ("mine", 3)


def test_a_saved_callback_missing_on_resume_is_named_in_a_warning(tmp_path, caplog):
    make_trainer(tmp_path, [Marker("a")], max_steps=2, save_strategy="steps", save_steps=2).train()
    resumed = make_trainer(tmp_path, max_steps=2, restore_callback_states_from_checkpoint=True)
    with caplog.at_level(logging.WARNING, logger="trainer.trainer"):
        resumed.train(resume_from_checkpoint=True)
    assert "Marker" in caplog.text


def test_a_step_strategy_evaluates_at_the_end_when_the_last_step_is_not_an_eval_step(tmp_path):
    steps = Steps()
    make_trainer(tmp_path, [steps], max_steps=7, eval_strategy="steps", eval_steps=3).train()
    assert steps.evaluated_at == [3, 6, 7]
    steps = Steps()
    make_trainer(tmp_path, [steps], max_steps=6, eval_strategy="steps", eval_steps=3).train()
    assert steps.evaluated_at == [3, 6]  # no second evaluation of step 6


def test_eval_delay_skips_the_early_evaluations(tmp_path):
    steps = Steps()
    make_trainer(tmp_path, [steps], max_steps=8, eval_strategy="steps", eval_steps=2, eval_delay=5).train()
    assert steps.evaluated_at == [6, 8]


def test_eval_steps_default_to_logging_steps_under_the_steps_strategy(tmp_path):
    steps = Steps()
    trainer = make_trainer(tmp_path, [steps], max_steps=4, eval_strategy="steps", logging_steps=2)
    assert trainer.args.eval_steps == 2
    trainer.train()
    assert steps.evaluated_at == [2, 4]


def test_compute_steps_turns_fractions_of_max_steps_into_steps():
    class Args:
        logging_steps, eval_steps, save_steps = 0.1, 0.25, 40

    state = TrainerState()
    state.compute_steps(Args(), max_steps=30)
    assert (state.logging_steps, state.eval_steps, state.save_steps) == (3, 8, 40)


def test_control_exports_its_flags_and_is_recreated_from_them():
    control = TrainerControl(should_save=True)
    again = TrainerControl.from_state(control.state())
    assert again == control and control.state()["attributes"] == {}


def test_eval_and_test_dataloaders_default_to_the_trainers_datasets(tmp_path):
    trainer = make_trainer(tmp_path, per_device_eval_batch_size=4)
    assert len(trainer.get_eval_dataloader()) == 4  # 16 samples, 4 a batch
    assert len(trainer.get_test_dataloader(Regression(8))) == 2
    named = Trainer(
        model=make_model(), args=quiet_args(tmp_path), eval_dataset={"a": Regression(8), "b": Regression(24)}
    )
    assert len(named.get_eval_dataloader("b")) == 3


def test_the_handler_takes_transformers_arguments_and_has_a_method_per_event(caplog):
    received = {}

    class Record(TrainerCallback):
        def on_push_begin(self, args, state, control, **kwargs):
            received.update(kwargs)

    with caplog.at_level(logging.WARNING, logger="trainer.callbacks"):
        handler = CallbackHandler(
            [Record()], model="m", processing_class="p", optimizer=None, lr_scheduler=None
        )
    assert "DefaultFlowCallback" in caplog.text  # nothing would decide when to log, evaluate or save
    handler.eval_dataloader = "loader"
    handler.on_push_begin(None, TrainerState(), TrainerControl(), extra=1)
    assert received == {
        "model": "m",
        "processing_class": "p",
        "optimizer": None,
        "lr_scheduler": None,
        "eval_dataloader": "loader",
        "extra": 1,
    }
    assert handler.pop_callback(DefaultFlowCallback) is None
