"""Memory metrics (transformers' names: `<stage>_mem_cpu_alloc_delta`, ...) and the run peaks every train() records.

The figures are process RSS, so each test allocates far more (200 MiB, written so that the pages are resident) than
the noise of a short run on a tiny model, and checks the figure within a stated tolerance.
"""

from __future__ import annotations

import time

import psutil
import pytest
import torch
from trainer_tasks import DropoutMLP, Regression, make_model, quiet_args

from trainer import Trainer, TrainerCallback
from trainer.memory import RssPeakCounter

MiB = 2**20
BLOCK = 200 * MiB
TOLERANCE = 40 * MiB  # allocator and interpreter noise of a few training steps, measured at a few MiB


def block() -> torch.Tensor:
    # ones, not empty: the pages must be written to count in the RSS
    return torch.ones(BLOCK, dtype=torch.uint8)


class HoldABlock(TrainerCallback):
    """Allocates 200 MiB when training begins and keeps it."""

    def __init__(self) -> None:
        self.held: list[torch.Tensor] = []

    def on_train_begin(self, args, state, control, **kwargs):
        self.held.append(block())


class BlockForAMoment(TrainerCallback):
    """Allocates 200 MiB at step 2 and frees it at once."""

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 2:
            transient = block()
            del transient


def measured_trainer(tmp_path, **fields) -> Trainer:
    args = quiet_args(tmp_path, max_steps=4, use_cpu=True, skip_memory_metrics=False, **fields)
    trainer = Trainer(model=make_model(), args=args, train_dataset=Regression(32), eval_dataset=Regression(8))
    trainer.train()  # the first run loads what every run needs (kernels, lazy imports): the next one is measured
    return trainer


def test_a_block_held_across_training_is_the_train_cpu_alloc_delta(tmp_path):
    trainer = measured_trainer(tmp_path)
    trainer.add_callback(HoldABlock())
    metrics = trainer.train().metrics
    assert metrics["train_mem_cpu_alloc_delta"] == pytest.approx(BLOCK, abs=TOLERANCE)
    assert 0 <= metrics["train_mem_cpu_peaked_delta"] < TOLERANCE
    assert trainer.state.log_history[-1]["train_mem_cpu_alloc_delta"] == metrics["train_mem_cpu_alloc_delta"]


def test_a_block_freed_within_training_is_the_train_cpu_peaked_delta(tmp_path):
    trainer = measured_trainer(tmp_path)
    trainer.add_callback(BlockForAMoment())
    metrics = trainer.train().metrics
    assert abs(metrics["train_mem_cpu_alloc_delta"]) < TOLERANCE
    assert metrics["train_mem_cpu_peaked_delta"] == pytest.approx(BLOCK, abs=TOLERANCE)
    assert metrics["train_mem_cpu_peak"] >= psutil.Process().memory_info().rss + BLOCK - TOLERANCE


def test_by_default_no_memory_metrics_but_the_run_peaks_are_recorded(tmp_path):
    trainer = Trainer(
        model=make_model(),
        args=quiet_args(tmp_path, max_steps=4, use_cpu=True),
        train_dataset=Regression(32),
        callbacks=[BlockForAMoment()],
    )
    output = trainer.train()
    assert not [key for key in output.metrics if key.endswith("_delta") or key.startswith("before_init")]
    peak = trainer.state.peak_memory["cpu_rss"]
    assert peak >= psutil.Process().memory_info().rss + BLOCK - TOLERANCE  # the 200 MiB of step 2 are in it
    assert trainer.state.peak_memory == {"cpu_rss": peak, "gpu_allocated": None, "gpu_reserved": None}
    # as transformers: no memory key in the metrics or the final log entry unless skip_memory_metrics=False
    final = trainer.state.log_history[-1]
    assert not [key for key in {**final, **output.metrics} if "_mem_" in key]


@pytest.mark.slow  # 10 s on 2 cores: run by .ci/run's slow suite
def test_init_figures_ride_with_the_first_phase_and_evaluation_inside_training_is_not_a_phase(tmp_path):
    args = quiet_args(
        tmp_path, max_steps=4, use_cpu=True, skip_memory_metrics=False, eval_strategy="steps", eval_steps=2
    )
    trainer = Trainer(model=make_model(), args=args, train_dataset=Regression(32), eval_dataset=Regression(8))
    first = trainer.evaluate()
    assert {"init_mem_cpu_alloc_delta", "init_mem_cpu_peaked_delta", "before_init_mem_cpu"} <= first.keys()
    assert {"eval_mem_cpu_alloc_delta", "eval_mem_cpu_peaked_delta"} <= first.keys()
    assert first["before_init_mem_cpu"] > 0
    again = trainer.evaluate()
    assert "eval_mem_cpu_alloc_delta" in again and "init_mem_cpu_alloc_delta" not in again
    trainer.train()
    during = [entry for entry in trainer.state.log_history if "eval_loss" in entry]
    assert len(during) == 2 and not [key for entry in during for key in entry if "_mem_" in key]
    assert "train_mem_cpu_alloc_delta" in trainer.state.log_history[-1]
    predicted = trainer.predict(Regression(8)).metrics
    assert {"test_mem_cpu_alloc_delta", "test_mem_cpu_peaked_delta"} <= predicted.keys()


def test_a_phase_that_raises_is_dropped_and_the_next_one_is_measured(tmp_path):
    class LossOnlyWhenEvaluating(DropoutMLP):
        def forward(self, x, labels=None):
            out = super().forward(x, labels)
            if self.training:
                raise RuntimeError("injected failure in training")
            return out

    args = quiet_args(tmp_path, max_steps=2, use_cpu=True, skip_memory_metrics=False)
    trainer = Trainer(
        model=LossOnlyWhenEvaluating(), args=args, train_dataset=Regression(16), eval_dataset=Regression(8)
    )
    with pytest.raises(RuntimeError, match="injected failure"):
        trainer.train()
    # the failed train is not taken for an outer phase that evaluation would be nested in
    assert "eval_mem_cpu_alloc_delta" in trainer.evaluate()


def test_the_sampling_counter_sees_a_short_peak_where_the_kernel_counter_cannot_be_reset():
    counter = RssPeakCounter()
    counter._kernel = False  # the path of systems without /proc/self/clear_refs, on this one
    try:
        counter.reset()
        transient = block()
        time.sleep(0.05)  # ten sampling intervals
        del transient
        assert counter.peak() - counter.rss() == pytest.approx(BLOCK, abs=TOLERANCE)
    finally:
        counter.stop()
