"""A checkpoint's fsync, rename and rotation run off the training thread: the step loop goes on while they run, a
callback that reads the checkpoint at on_save finds it in place, training ends with every checkpoint in place, and a
failure in the background is raised by train()."""

from __future__ import annotations

import threading

import pytest
from trainer_tasks import Regression, make_model, quiet_args

from trainer import Trainer, TrainerCallback
from trainer import checkpoint as ckpt
from trainer.checkpoint import list_checkpoints


def test_the_step_loop_does_not_wait_for_a_checkpoint_to_reach_the_disk(tmp_path, monkeypatch):
    released, events = threading.Event(), []
    fsync = ckpt._fsync_tree

    def slow_fsync(folder):
        events.append(f"fsync {folder.name}")
        if folder.name == ".checkpoint-2.tmp":
            released.wait(10)  # until the loop took its next step (10 s: the loop waited, which it must not)
        fsync(folder)
        events.append(f"flushed {folder.name}")

    class NextStep(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 3:
                events.append("step 3")
                released.set()

    monkeypatch.setattr(ckpt, "_fsync_tree", slow_fsync)
    args = quiet_args(tmp_path, max_steps=4, save_strategy="steps", save_steps=2)
    Trainer(model=make_model(), args=args, train_dataset=Regression(64), callbacks=[NextStep()]).train()
    assert events.index("step 3") < events.index("flushed .checkpoint-2.tmp")
    assert [p.name for p in list_checkpoints(tmp_path)] == [
        "checkpoint-2",
        "checkpoint-4",
    ]  # all in place at the end
    assert not list(tmp_path.glob(".checkpoint-*"))


def test_a_callback_reading_the_checkpoint_at_on_save_finds_it_in_place(tmp_path):
    seen = []

    class Reader(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            seen.append((tmp_path / f"checkpoint-{state.global_step}" / "trainer_state.json").is_file())

    args = quiet_args(tmp_path, max_steps=4, save_strategy="steps", save_steps=1, save_total_limit=2)
    Trainer(model=make_model(), args=args, train_dataset=Regression(64), callbacks=[Reader()]).train()
    assert seen == [True] * 4
    assert [p.name for p in list_checkpoints(tmp_path)] == [
        "checkpoint-3",
        "checkpoint-4",
    ]  # rotated as before


def test_a_failure_in_the_background_is_raised_by_train(tmp_path, monkeypatch):
    def failing_fsync(folder):
        raise OSError("disk full")

    monkeypatch.setattr(ckpt, "_fsync_tree", failing_fsync)
    args = quiet_args(tmp_path, max_steps=4, save_strategy="steps", save_steps=2)
    with pytest.raises(OSError, match="disk full"):
        Trainer(model=make_model(), args=args, train_dataset=Regression(64)).train()
    assert list_checkpoints(tmp_path) == []  # never renamed: resume picks nothing half-written
