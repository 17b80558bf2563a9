"""Exact resume: k steps, a process exit, then a resume to N gives the same weights bit for bit as N in one go."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from trainer.checkpoint import latest_checkpoint, list_checkpoints

WORKER = Path(__file__).with_name("trainer_resume_worker.py")
MAX_STEPS = 20  # 60 samples / batch 8 = 8 steps per epoch: steps 11 and 9 stop mid-epoch


def run_worker(*argv: object) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, str(WORKER), *map(str, argv)], env=env, capture_output=True, text=True, timeout=120
    )


def load(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)


def assert_bitwise_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), f"{name} differs after resume"


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> dict[str, torch.Tensor]:
    """The N steps in one go, in this process (the workers use one thread, so this does too)."""
    from trainer_resume_worker import train

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return train(str(tmp_path_factory.mktemp("full") / "run"), MAX_STEPS)
    finally:
        torch.set_num_threads(threads)


def test_resume_mid_epoch_in_the_same_process_is_bitwise_identical(tmp_path, uninterrupted):
    from trainer_resume_worker import train

    half = train(str(tmp_path / "run"), MAX_STEPS, stop_at=11)
    assert latest_checkpoint(tmp_path / "run").name == "checkpoint-11"
    assert any(not torch.equal(half[k], uninterrupted[k]) for k in half), "the first half must stop early"
    assert_bitwise_equal(train(str(tmp_path / "run"), MAX_STEPS, resume=True), uninterrupted)


@pytest.mark.slow  # 10 s on 2 cores: run by .ci/run's slow suite
def test_process_dies_while_saving_then_a_new_process_resumes_bitwise(tmp_path, uninterrupted):
    # save_steps=3: checkpoint-3 and -6 complete, the process dies in the middle of writing checkpoint-9.
    # The new process resumes from checkpoint-6, in the middle of epoch 0 (8 steps per epoch).
    crashed = run_worker(tmp_path / "run", MAX_STEPS, 0, 0, tmp_path / "never.pt", 9)
    assert crashed.returncode == 17
    assert not (tmp_path / "never.pt").exists()
    assert (tmp_path / "run" / ".checkpoint-9.tmp" / "model.safetensors").exists()  # the half-written save
    assert [p.name for p in list_checkpoints(tmp_path / "run")] == ["checkpoint-3", "checkpoint-6"]
    assert latest_checkpoint(tmp_path / "run").name == "checkpoint-6"

    resumed = run_worker(tmp_path / "run", MAX_STEPS, 0, 1, tmp_path / "resumed.pt")
    assert resumed.returncode == 0, resumed.stderr
    assert_bitwise_equal(load(tmp_path / "resumed.pt"), uninterrupted)
    assert not (tmp_path / "run" / ".checkpoint-9.tmp").exists()  # replaced by the complete save of step 9
    assert (tmp_path / "run" / "checkpoint-9" / "trainer_state.json").exists()


@pytest.mark.parametrize(
    "extra", [{"bf16": True}, {"optim": "adafactor", "weight_decay": 0.1, "data_seed": 7}]
)
def test_resume_with_accumulation_and_a_short_last_window_is_bitwise_identical(tmp_path, extra):
    from trainer_resume_worker import StopAt
    from trainer_tasks import Regression, make_model, quiet_args

    from trainer import Trainer

    def run(folder, stop_at=0, resume=False):
        # 60 samples / batch 8 = 8 micro-batches per epoch: windows of 3, 3 and 2 -> 3 steps per epoch
        args = quiet_args(
            folder,
            max_steps=13,
            gradient_accumulation_steps=3,
            save_strategy="no",
            lr_scheduler_type="cosine",
            warmup_ratio=0.1,
            **extra,
        )
        callbacks = [StopAt(stop_at)] if stop_at else []
        trainer = Trainer(model=make_model(), args=args, train_dataset=Regression(60), callbacks=callbacks)
        trainer.train(resume_from_checkpoint=True if resume else None)
        return trainer.model.state_dict()

    full = run(tmp_path / "full")
    run(tmp_path / "split", stop_at=5)  # step 5 is the middle of epoch 1
    assert_bitwise_equal(run(tmp_path / "split", resume=True), full)
