"""Callbacks: the event order, a misspelt hook refused at registration, control from callbacks, stateful callbacks."""

from __future__ import annotations

import pytest
from trainer_tasks import Regression, make_model, quiet_args

from trainer import (
    DefaultFlowCallback,
    EarlyStoppingCallback,
    PrinterCallback,
    ProgressCallback,
    Trainer,
    TrainerCallback,
    TrainerConfigError,
    TrainerControl,
)
from trainer.checkpoint import list_checkpoints
from trainer.events import Event


class RecordAll(TrainerCallback):
    """Records every event with the kwargs it got."""

    def __init__(self) -> None:
        self.events: list[tuple[str, set]] = []


for _event in Event:
    setattr(
        RecordAll,
        _event.value,
        (lambda name: lambda self, args, state, control, **kw: self.events.append((name, set(kw))))(
            _event.value
        ),
    )


def test_events_fire_in_loop_order_with_the_documented_kwargs(tmp_path):
    recorder = RecordAll()
    args = quiet_args(
        tmp_path,
        max_steps=2,
        gradient_accumulation_steps=2,
        eval_strategy="steps",
        eval_steps=2,
        logging_steps=2,
        save_strategy="steps",
        save_steps=2,
    )
    trainer = Trainer(
        model=make_model(),
        args=args,
        train_dataset=Regression(32),
        eval_dataset=Regression(8),
        callbacks=[recorder],
    )
    trainer.train()
    trainer.predict(Regression(8))
    names = [name for name, _ in recorder.events]
    one_step = [
        "on_step_begin",
        "on_substep_end",
        "on_pre_optimizer_step",
        "on_optimizer_step",
        "on_step_end",
    ]
    assert names[:2] == ["on_init_end", "on_train_begin"]
    assert names[2:8] == ["on_epoch_begin", *one_step]
    after_step_two = names[8 + len(one_step) :]
    assert after_step_two[:4] == ["on_log", "on_prediction_step", "on_log", "on_evaluate"]
    assert after_step_two[4:] == [
        "on_save",
        "on_epoch_end",
        "on_log",
        "on_train_end",
        "on_prediction_step",
        "on_predict",
    ]
    kwargs = dict(recorder.events)
    assert {"model", "optimizer", "lr_scheduler", "train_dataloader", "trainer"} <= kwargs["on_step_end"]
    assert "metrics" in kwargs["on_evaluate"] and "logs" in kwargs["on_log"]


def test_a_misspelt_hook_is_an_error_when_registered(tmp_path):
    class Typo(TrainerCallback):
        def on_evalute(self, args, state, control, **kwargs):
            pass

    with pytest.raises(
        TrainerConfigError, match="'on_evalute', which is not a trainer event; did you mean 'on_evaluate'"
    ):
        Trainer(model=make_model(), args=quiet_args(tmp_path), callbacks=[Typo()])
    trainer = Trainer(model=make_model(), args=quiet_args(tmp_path))
    with pytest.raises(TrainerConfigError, match="on_evalute"):
        trainer.add_callback(Typo)


def test_default_callbacks_and_add_pop_remove(tmp_path):
    trainer = Trainer(model=make_model(), args=quiet_args(tmp_path, disable_tqdm=False))
    kinds = [type(cb) for cb in trainer.callback_handler.callbacks]
    assert kinds == [DefaultFlowCallback, ProgressCallback]
    assert [
        type(cb) for cb in Trainer(model=make_model(), args=quiet_args(tmp_path)).callback_handler.callbacks
    ] == [DefaultFlowCallback, PrinterCallback]
    early = EarlyStoppingCallback()
    trainer.add_callback(early)
    assert trainer.pop_callback(EarlyStoppingCallback) is early
    trainer.add_callback(early)
    trainer.remove_callback(early)
    assert early not in trainer.callback_handler.callbacks


def test_stopping_from_a_callback_ends_cleanly_and_should_save_saves(tmp_path):
    class StopAtThree(TrainerCallback):
        def __init__(self):
            self.ended = False

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 3:
                control.should_save = True
                control.should_training_stop = True

        def on_train_end(self, args, state, control, **kwargs):
            self.ended = True

    stopper = StopAtThree()
    trainer = Trainer(
        model=make_model(),
        args=quiet_args(tmp_path, max_steps=50),
        train_dataset=Regression(64),
        callbacks=[stopper],
    )
    output = trainer.train()
    assert output.global_step == 3
    assert stopper.ended
    assert [p.name for p in list_checkpoints(tmp_path)] == ["checkpoint-3"]


def test_a_callback_may_return_a_new_control(tmp_path):
    class ReturnsControl(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            return TrainerControl(should_training_stop=state.global_step >= 2, should_log=True)

    trainer = Trainer(
        model=make_model(),
        args=quiet_args(tmp_path, max_steps=10),
        train_dataset=Regression(64),
        callbacks=[ReturnsControl()],
    )
    assert trainer.train().global_step == 2
    assert [entry["step"] for entry in trainer.state.log_history if "loss" in entry] == [1, 2]


def test_printer_callback_prints_logs(tmp_path, capsys):
    args = quiet_args(tmp_path, max_steps=2, logging_steps=1)
    Trainer(model=make_model(), args=args, train_dataset=Regression(32)).train()
    printed = capsys.readouterr().out
    assert printed.count("'loss'") == 2 and "'learning_rate'" in printed and "train_runtime" in printed


def test_progress_bar_shows_steps(tmp_path, capsys):
    args = quiet_args(tmp_path, max_steps=3, logging_steps=1, disable_tqdm=False)
    Trainer(model=make_model(), args=args, train_dataset=Regression(32)).train()
    err = capsys.readouterr().err
    assert "3/3" in err and "loss=" in err
