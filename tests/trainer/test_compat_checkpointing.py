"""Cases of transformers' tests/trainer/test_trainer_checkpointing.py that run on CPU: checkpoint rotation (checked
against transformers' own rotate_checkpoints), resuming with another batch size, and resume_from_checkpoint=False."""

from __future__ import annotations

from pathlib import Path

import pytest
from trainer_tasks import Regression, make_model, quiet_args

from trainer import Trainer, TrainerState
from trainer.checkpoint import rotate_checkpoints

STEPS = (5, 10, 15, 20, 25)


def left_after_rotation(rotate, folder: Path, limit: int | None, best: int | None) -> list[int]:
    for step in STEPS:
        (folder / f"checkpoint-{step}").mkdir(parents=True)
        (folder / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")  # a complete checkpoint here
    rotate(folder, limit, None if best is None else str(folder / f"checkpoint-{best}"))
    return sorted(int(path.name.split("-")[1]) for path in folder.glob("checkpoint-*"))


@pytest.mark.parametrize(
    ("limit", "best"), [(2, None), (2, 5), (1, 5), (1, 25), (2, 25), (3, 10), (None, None), (1, None)]
)
def test_rotation_keeps_the_checkpoints_transformers_keeps(tmp_path, limit, best):
    trainer_utils = pytest.importorskip("transformers.trainer_utils")

    def theirs(folder, limit, best):
        trainer_utils.rotate_checkpoints(
            output_dir=str(folder), save_total_limit=limit, best_model_checkpoint=best
        )

    expected = left_after_rotation(theirs, tmp_path / "theirs", limit, best)
    assert left_after_rotation(rotate_checkpoints, tmp_path / "ours", limit, best) == expected
    if best is not None and limit is not None:
        assert best in expected  # the best checkpoint survives whatever the limit


def test_resuming_with_another_batch_size_trains_with_the_new_one(tmp_path):
    first = Trainer(
        model=make_model(),
        args=quiet_args(
            tmp_path, max_steps=2, save_steps=1, save_strategy="steps", per_device_train_batch_size=2
        ),
        train_dataset=Regression(64),
    )
    first.train()
    saved = TrainerState.load_from_json(tmp_path / "checkpoint-1" / "trainer_state.json")
    assert saved.train_batch_size == 2
    args = quiet_args(
        tmp_path, max_steps=4, save_steps=1, save_strategy="steps", per_device_train_batch_size=4
    )
    second = Trainer(model=make_model(), args=args, train_dataset=Regression(64))
    second.train(resume_from_checkpoint=str(tmp_path / "checkpoint-1"))
    assert second.state.train_batch_size == 4 and second.state.global_step == 4


def test_resume_from_checkpoint_false_trains_from_the_start(tmp_path):
    args = quiet_args(tmp_path, max_steps=3, save_steps=1, save_strategy="steps", logging_steps=1)
    Trainer(model=make_model(), args=args, train_dataset=Regression(64)).train()
    again = Trainer(model=make_model(), args=args, train_dataset=Regression(64))
    again.train(resume_from_checkpoint=False)  # checkpoints are in output_dir, and ignored
    assert [entry["step"] for entry in again.state.log_history if "loss" in entry] == [1, 2, 3]
