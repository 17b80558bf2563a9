"""A dropped Trainer gives its model, optimizer and data back at once, as any Python object does when its last reference
goes: no reference cycle waits for the garbage collector. What a user of a search does between trials (`del trainer`,
then the next model) must not hold two models at a time, and on a GPU the first one's memory."""

from __future__ import annotations

import gc
import weakref

import pytest
from trainer_tasks import Regression, make_model, quiet_args

from trainer import Trainer, TrainerCallback


class Peek(TrainerCallback):
    """Reads the trainer a hook receives, as hpo's callbacks do (its strategy, its callback handler)."""

    def __init__(self) -> None:
        self.seen_steps: list[int] = []

    def on_step_end(self, args, state, control, trainer=None, **kwargs):
        self.seen_steps.append(trainer.state.global_step)


@pytest.fixture
def no_garbage_collector():
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def trained_and_dropped(tmp_path, **fields) -> tuple[weakref.ref, weakref.ref, Peek]:
    """Train, evaluate and predict, then drop the Trainer: weak references to it and to its model."""
    peek = Peek()
    trainer = Trainer(
        model=make_model(),
        args=quiet_args(tmp_path, max_steps=6, **fields),
        train_dataset=Regression(),
        eval_dataset=Regression(seed=1),
        callbacks=[peek],
    )
    trainer.train()
    trainer.evaluate()
    trainer.predict(Regression(n=16, seed=2))
    return weakref.ref(trainer), weakref.ref(trainer.model), peek


def test_a_dropped_trainer_frees_its_model_without_the_garbage_collector(tmp_path, no_garbage_collector):
    trainer, model, peek = trained_and_dropped(tmp_path)
    # the callbacks still reached the trainer through their hooks
    assert peek.seen_steps == [1, 2, 3, 4, 5, 6]
    assert trainer() is None and model() is None


def test_checkpoints_and_the_best_model_leave_nothing_behind(tmp_path, no_garbage_collector):
    trainer, model, _ = trained_and_dropped(
        tmp_path,
        eval_strategy="steps",
        eval_steps=2,
        save_strategy="steps",
        save_steps=2,
        load_best_model_at_end=True,
    )
    assert (tmp_path / "checkpoint-6").is_dir()
    assert trainer() is None and model() is None
