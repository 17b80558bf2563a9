"""Checkpoints: layout, safe loading, rotation keeping best and newest, atomic saves, best model at the end."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from trainer_tasks import Regression, make_model, quiet_args

from trainer import Trainer, TrainerCallback, TrainerState
from trainer.checkpoint import latest_checkpoint, list_checkpoints, resolve_resume, rotate_checkpoints
from trainer.errors import CheckpointError


def test_a_checkpoint_holds_the_contract_files_loadable_safely(tmp_path):
    args = quiet_args(tmp_path, max_steps=4, save_strategy="steps", save_steps=4, warmup_steps=1)
    trainer = Trainer(model=make_model(), args=args, train_dataset=Regression(32))
    trainer.train()
    folder = tmp_path / "checkpoint-4"
    assert sorted(p.name for p in folder.iterdir()) == [
        "model.safetensors",
        "optimizer.pt",
        "rng_state.pth",
        "scheduler.pt",
        "trainer_state.json",
        "training_args.json",
    ]
    weights = load_file(folder / "model.safetensors")
    for name, tensor in trainer.model.state_dict().items():
        assert torch.equal(weights[name], tensor.cpu())  # the trained model is on the GPU where there is one
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth"):
        torch.load(folder / name, weights_only=True)  # no pickled code
    state = TrainerState.load_from_json(folder / "trainer_state.json")
    assert state.global_step == 4 and state.max_steps == 4
    assert json.loads((folder / "training_args.json").read_text())["save_steps"] == 4


def test_saved_weights_follow_the_umask_as_the_files_beside_them(tmp_path):
    """safetensors 0.8 creates its files 0600 (safetensors#782); a checkpoint's and save_model's weights get the
    mode of the JSON files beside them, so another account can load what it can list."""
    mode = lambda path: path.stat().st_mode & 0o777  # noqa: E731
    args = quiet_args(tmp_path, max_steps=4, save_strategy="steps", save_steps=4, warmup_steps=1)
    trainer = Trainer(model=make_model(), args=args, train_dataset=Regression(32))
    trainer.train()
    saved = trainer.save_model(tmp_path / "final")
    for folder, sibling in ((tmp_path / "checkpoint-4", "trainer_state.json"), (saved, "training_args.json")):
        assert mode(folder / "model.safetensors") == mode(folder / sibling), folder


def test_rotation_keeps_the_best_and_the_newest(tmp_path):
    losses = iter([0.5, 0.1, 0.9, 0.8, 0.7, 0.6])  # the best is the evaluation at step 2

    class FixedEvalLoss(TrainerCallback):
        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            metrics["eval_loss"] = next(losses)

    args = quiet_args(
        tmp_path,
        max_steps=6,
        eval_strategy="steps",
        eval_steps=1,
        save_strategy="steps",
        save_steps=1,
        save_total_limit=2,
        load_best_model_at_end=True,
    )
    trainer = Trainer(
        model=make_model(),
        args=args,
        train_dataset=Regression(64),
        eval_dataset=Regression(8),
        callbacks=[FixedEvalLoss()],
    )
    trainer.train()
    assert [p.name for p in list_checkpoints(tmp_path)] == ["checkpoint-2", "checkpoint-6"]
    assert trainer.state.best_global_step == 2 and trainer.state.best_metric == 0.1
    assert trainer.state.best_model_checkpoint == str(tmp_path / "checkpoint-2")
    # load_best_model_at_end: the final weights are checkpoint-2's
    best = load_file(tmp_path / "checkpoint-2" / "model.safetensors")
    for name, tensor in trainer.model.state_dict().items():
        assert torch.equal(best[name], tensor.cpu())


def test_rotation_with_a_limit_of_one_still_keeps_best_and_newest(tmp_path):
    for step in (1, 2, 3):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    deleted = rotate_checkpoints(tmp_path, 1, tmp_path / "checkpoint-1")
    assert [p.name for p in deleted] == ["checkpoint-2"]
    assert [p.name for p in list_checkpoints(tmp_path)] == ["checkpoint-1", "checkpoint-3"]


def test_save_strategy_best_saves_only_improvements(tmp_path):
    losses = iter([0.5, 0.6, 0.4, 0.7])

    class FixedEvalLoss(TrainerCallback):
        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            metrics["eval_loss"] = next(losses)

    args = quiet_args(
        tmp_path,
        max_steps=4,
        eval_strategy="steps",
        eval_steps=1,
        save_strategy="best",
        metric_for_best_model="loss",
    )
    Trainer(
        model=make_model(),
        args=args,
        train_dataset=Regression(64),
        eval_dataset=Regression(8),
        callbacks=[FixedEvalLoss()],
    ).train()
    assert [p.name for p in list_checkpoints(tmp_path)] == ["checkpoint-1", "checkpoint-3"]


def test_an_exception_during_a_save_leaves_no_checkpoint_folder(tmp_path, monkeypatch):
    args = quiet_args(tmp_path, max_steps=4, save_strategy="steps", save_steps=2)
    trainer = Trainer(model=make_model(), args=args, train_dataset=Regression(64))
    original = trainer.strategy.save_checkpoint

    def failing_save(directory, *rest):
        original(directory, *rest)
        if directory.name.startswith(".checkpoint-4"):
            raise OSError("disk full")

    monkeypatch.setattr(trainer.strategy, "save_checkpoint", failing_save)
    with pytest.raises(OSError, match="disk full"):
        trainer.train()
    assert [p.name for p in list_checkpoints(tmp_path)] == ["checkpoint-2"]
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoint-2"
    assert resolve_resume(True, tmp_path) == tmp_path / "checkpoint-2"
    assert (tmp_path / ".checkpoint-4.tmp").is_dir()

    monkeypatch.undo()
    resumed = Trainer(
        model=make_model(),
        args=quiet_args(tmp_path, max_steps=3, save_strategy="steps", save_steps=3),
        train_dataset=Regression(64),
    )
    resumed.train(resume_from_checkpoint=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint-2",
        "checkpoint-3",
    ]  # the stale one is gone


def test_resume_errors_are_clear(tmp_path):
    with pytest.raises(CheckpointError, match="holds no complete checkpoint"):
        resolve_resume(True, tmp_path)
    with pytest.raises(CheckpointError, match="does not exist"):
        resolve_resume(tmp_path / "checkpoint-9", tmp_path)
    (tmp_path / "checkpoint-9").mkdir()
    with pytest.raises(CheckpointError, match="not a complete checkpoint"):
        resolve_resume(tmp_path / "checkpoint-9", tmp_path)


def test_save_only_model_writes_weights_and_refuses_to_resume(tmp_path):
    args = quiet_args(tmp_path, max_steps=2, save_strategy="steps", save_steps=2, save_only_model=True)
    Trainer(model=make_model(), args=args, train_dataset=Regression(32)).train()
    assert not (tmp_path / "checkpoint-2" / "optimizer.pt").exists()
    assert (tmp_path / "checkpoint-2" / "model.safetensors").exists()
    trainer = Trainer(model=make_model(), args=args, train_dataset=Regression(32))
    with pytest.raises(CheckpointError, match="save_only_model"):
        trainer.train(resume_from_checkpoint=True)


def test_resume_from_an_explicit_path_continues_its_step(tmp_path):
    args = quiet_args(tmp_path, max_steps=6, save_strategy="steps", save_steps=2)
    Trainer(model=make_model(), args=args, train_dataset=Regression(32)).train()
    trainer = Trainer(model=make_model(), args=args, train_dataset=Regression(32))
    output = trainer.train(resume_from_checkpoint=str(tmp_path / "checkpoint-4"))
    assert output.global_step == 6
    assert trainer.state.log_history[-1]["step"] == 6


def test_save_model_writes_safetensors_and_arguments(tmp_path):
    trainer = Trainer(model=make_model(), args=quiet_args(tmp_path))
    folder = trainer.save_model(tmp_path / "export")
    weights = load_file(folder / "model.safetensors")
    assert weights.keys() == trainer.model.state_dict().keys()
    assert json.loads((folder / "training_args.json").read_text())["output_dir"] == str(tmp_path)


def test_tied_weights_save_and_load(tmp_path):
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(10, 4)
            self.out = torch.nn.Linear(4, 10, bias=False)
            self.out.weight = self.embed.weight

        def forward(self, input_ids, labels):
            return torch.nn.functional.cross_entropy(self.out(self.embed(input_ids)), labels)

    data = [{"input_ids": torch.tensor(i % 10), "labels": torch.tensor((i + 1) % 10)} for i in range(16)]
    args = quiet_args(tmp_path, max_steps=2, save_strategy="steps", save_steps=1)
    Trainer(model=Tied(), args=args, train_dataset=data).train()
    resumed = Trainer(
        model=Tied(), args=quiet_args(tmp_path, max_steps=3, save_strategy="no"), train_dataset=data
    )
    resumed.train(resume_from_checkpoint=True)
    assert resumed.model.out.weight is resumed.model.embed.weight
