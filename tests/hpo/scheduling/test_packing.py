"""The packing decision as a pure function of NVML-shaped figures (one 80 GB H100: 85520809984 bytes in total)."""

from __future__ import annotations

import pytest

from hpo.scheduling.packing import (
    CUDA_CONTEXT_BYTES,
    MeasuredTrial,
    RunningTrial,
    default_margin,
    expected_peak,
    footprint,
    may_start_trial,
)

GiB = 1 << 30
H100_TOTAL = 85520809984  # nvmlDeviceGetMemoryInfo(handle).total on an H100 80GB HBM3
IDLE_USED = 535 << 20  # what NVML shows used on that GPU with no process on it
SMALL_BERT = footprint(int(1.6 * GiB))  # a 4-layer BERT trial: 1.6 GiB reserved by PyTorch + the CUDA context
BIG = 30 * GiB  # the trials that did not fit three to a GPU


def on_h100(running: list[RunningTrial], next_peak: int | None, **options) -> object:
    """The decision with the GPU's free memory as NVML would show it: total - idle use - what the trials hold."""
    free = H100_TOTAL - IDLE_USED - sum(trial.used for trial in running)
    options.setdefault("free_cpu_cores", 8)
    return may_start_trial(total=H100_TOTAL, free=free, running=running, next_peak=next_peak, **options)


def test_the_first_trial_starts_on_an_empty_gpu_and_runs_alone_until_measured():
    first = on_h100([], next_peak=None)
    assert first.start and first.reason.startswith("start: no trial on this GPU")
    assert "79.1 GiB free of 79.6 GiB" in first.reason
    second = on_h100([RunningTrial(expected_peak=None, used=3 * GiB)], next_peak=None)
    assert not second.start and "first runs alone until it is" in second.reason
    # measured since, but one running trial is not: its growth is unknown, so nothing joins it
    assert not on_h100([RunningTrial(expected_peak=None, used=3 * GiB)], next_peak=SMALL_BERT).start


def test_small_bert_trials_fill_the_gpu_up_to_the_cap():
    running = [RunningTrial(SMALL_BERT, used=SMALL_BERT) for _ in range(4)]
    assert on_h100(running, SMALL_BERT, cap="auto").start
    capped = on_h100(running, SMALL_BERT, cap=4)
    assert not capped.start and capped.reason == "wait: 4 trials on this GPU, the cap (trials_per_gpu) is 4"
    assert on_h100(running[:3], SMALL_BERT, cap=4).start


def test_auto_packs_small_trials_until_the_cpu_cores_run_out():
    running = [RunningTrial(SMALL_BERT, used=SMALL_BERT) for _ in range(15)]
    assert on_h100(running, SMALL_BERT, free_cpu_cores=1).start  # memory would take 25 more
    blocked = on_h100(running, SMALL_BERT, free_cpu_cores=0)
    assert not blocked.start and blocked.reason == "wait: 0 CPU core(s) free, a trial needs 1"
    assert not on_h100([], SMALL_BERT, free_cpu_cores=1, cores_per_trial=2).start


def test_three_30_gb_trials_never_share_an_80_gb_gpu():
    just_started = RunningTrial(expected_peak=BIG, used=2 * GiB)  # loaded its weights, not yet at its peak
    assert on_h100([just_started], BIG).start  # 2 x 30 GiB fit
    third = on_h100([just_started, just_started], BIG)
    assert not third.start
    # the room accounts for the 2 x 28 GiB the running trials will still take, not only today's free memory
    assert third.reason == (
        "wait: expects 30.0 GiB, room 15.1 GiB (75.1 GiB free - 56.0 GiB still to grow for 2 running - 4.0 GiB "
        "margin)"
    )
    at_peak = RunningTrial(expected_peak=BIG, used=BIG)
    assert not on_h100([at_peak, at_peak], BIG).start


def test_the_margin_decides_a_tight_fit():
    # one 30 GiB trial at its peak: 49.1 GiB free; a 47 GiB trial fits without a margin, not with the default one
    running = [RunningTrial(BIG, used=BIG)]
    assert on_h100(running, 47 * GiB, margin=0).start
    assert not on_h100(running, 47 * GiB).start
    assert default_margin(H100_TOTAL) == H100_TOTAL // 20
    assert default_margin(8 * GiB) == 512 << 20  # a small GPU: at least 512 MiB


def test_expected_peak_is_the_largest_measured_scaled_up_by_the_batch_size():
    assert expected_peak([], {"per_device_train_batch_size": 8}) is None
    measured = [MeasuredTrial({"per_device_train_batch_size": 16, "learning_rate": 1e-4}, 10 * GiB)]
    assert expected_peak(measured, {"per_device_train_batch_size": 32}) == 20 * GiB
    assert expected_peak(measured, {"per_device_train_batch_size": 8}) == 10 * GiB  # never scaled down
    # no batch size to compare: the largest
    assert expected_peak(measured, {"learning_rate": 3e-4}) == 10 * GiB
    measured.append(MeasuredTrial({"per_device_train_batch_size": 8, "hidden_size": 1024}, 12 * GiB))
    # the bigger model at batch 8 bounds a batch-16 trial of it at 24 GiB: the largest of the scaled peaks
    assert expected_peak(measured, {"per_device_train_batch_size": 16}) == 24 * GiB
    both = [MeasuredTrial({"per_device_train_batch_size": 8, "max_length": 128}, 4 * GiB)]
    assert expected_peak(both, {"per_device_train_batch_size": 16, "max_length": 256}) == 16 * GiB
    assert expected_peak(both, {"per_device_train_batch_size": True}) == 4 * GiB  # a flag is no size


def test_a_footprint_is_the_reserved_peak_plus_what_lies_outside_pytorch():
    assert footprint(10 * GiB) == 10 * GiB + CUDA_CONTEXT_BYTES
    assert footprint(10 * GiB, non_pytorch=600 << 20) == 10 * GiB + (600 << 20)


@pytest.mark.parametrize("cap", [1, 2, 4])
def test_a_numeric_cap_is_a_hard_limit_even_with_room(cap):
    running = [RunningTrial(GiB, used=GiB)] * cap
    assert not on_h100(running, GiB, cap=cap).start
    assert on_h100(running[:-1], GiB, cap=cap).start
