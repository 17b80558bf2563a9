"""May another trial start on this GPU now? A pure function of given figures, so that every rule is unit-tested.

    expected footprint of a trial = the largest peak measured so far in the study, scaled up by the parameters known
                                    to drive memory (the batch size) when the next trial's value is larger
    room on the GPU               = NVML's free memory
                                    - what the running trials will still grow by (expected footprint - what they hold)
                                    - a safety margin
    start when: the trial count is under the cap (`trials_per_gpu`: a number, or `auto` for none), a CPU core is free,
                and, with trials of this study already on the GPU, the room covers the expected footprint.

An empty GPU always takes a trial (alone it has the best chance there is). Until one trial of the study has been
measured nothing is known of its size, so the first trial runs alone. Figures are bytes as NVML reports them: a
trial's footprint there is PyTorch's peak reserved memory plus the CUDA context (`footprint`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

# Parameters whose value scales a trial's activation memory about linearly (more samples per step, longer sequences).
MEMORY_SCALING_PARAMETERS = ("per_device_train_batch_size", "max_seq_length", "max_length")
# What a CUDA context with PyTorch's kernels takes beyond the caching allocator, when the trial did not measure it
# (a few hundred MiB with lazy module loading; more on older CUDA versions).
CUDA_CONTEXT_BYTES = 1 << 30
GiB = 1 << 30


@dataclass(frozen=True)
class MeasuredTrial:
    """A finished trial of the study: its parameters and the GPU footprint it reached, in bytes."""

    params: Mapping[str, Any]
    peak: int


@dataclass(frozen=True)
class RunningTrial:
    """A trial on the GPU now: its expected footprint (None: not known) and what NVML shows its process holding
    (0 when unknown, e.g. NVML's pids are the host's and this process sits in a container)."""

    expected_peak: int | None
    used: int = 0


@dataclass(frozen=True)
class PackingDecision:
    start: bool
    reason: str  # one line for the live table and the log

    def __bool__(self) -> bool:
        return self.start


def footprint(peak_reserved: int, non_pytorch: int | None = None) -> int:
    """A trial's footprint on the GPU as NVML counts it: PyTorch's peak reserved memory plus what the process held
    outside PyTorch's allocator (the CUDA context, library workspaces) when that was measured."""
    return peak_reserved + (non_pytorch if non_pytorch is not None else CUDA_CONTEXT_BYTES)


def expected_peak(
    measured: Sequence[MeasuredTrial],
    params: Mapping[str, Any],
    scale_by: Sequence[str] = MEMORY_SCALING_PARAMETERS,
) -> int | None:
    """The footprint to expect of a trial with `params`: None before any trial was measured; else the largest of the
    measured peaks, each scaled up by how much larger the next trial's scaling parameters are (never down: the part
    of memory that does not scale, the weights and optimizer state, stays). Scaling applies only to parameters both
    trials have as numbers; other parameters (model size) are covered by taking the largest."""
    if not measured:
        return None
    return max(math.ceil(trial.peak * _growth(trial.params, params, scale_by)) for trial in measured)


def _growth(seen: Mapping[str, Any], next_params: Mapping[str, Any], scale_by: Sequence[str]) -> float:
    growth = 1.0
    for name in scale_by:
        before, after = seen.get(name), next_params.get(name)
        if _positive_number(before) and _positive_number(after):
            growth *= max(1.0, after / before)
    return growth


def _positive_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def default_margin(total: int) -> int:
    """5% of the GPU, at least 512 MiB: fragmentation, and the noise of a peak measured once."""
    return max(512 << 20, total // 20)


def may_start_trial(
    *,
    total: int,
    free: int,
    running: Sequence[RunningTrial],
    next_peak: int | None,
    cap: int | Literal["auto"] = "auto",
    free_cpu_cores: int,
    cores_per_trial: int = 1,
    margin: int | None = None,
) -> PackingDecision:
    """Whether one more trial (expected footprint `next_peak`) may start on a GPU with `total`/`free` bytes (NVML's
    figures, taken now) that runs `running` trials of this study, with `free_cpu_cores` cores not held by trials."""
    if cap != "auto" and len(running) >= cap:
        return PackingDecision(
            False, f"wait: {len(running)} trials on this GPU, the cap (trials_per_gpu) is {cap}"
        )
    if free_cpu_cores < cores_per_trial:
        return PackingDecision(
            False, f"wait: {free_cpu_cores} CPU core(s) free, a trial needs {cores_per_trial}"
        )
    if not running:
        return PackingDecision(True, f"start: no trial on this GPU ({_size(free)} free of {_size(total)})")
    unknown = sum(1 for trial in running if trial.expected_peak is None)
    if next_peak is None or unknown:
        return PackingDecision(
            False, "wait: no trial of the study has been measured yet; the first runs alone until it is"
        )
    growth = sum(max(0, trial.expected_peak - trial.used) for trial in running)
    margin = default_margin(total) if margin is None else margin
    room = free - growth - margin
    figures = (
        f"expects {_size(next_peak)}, room {_size(room)} ({_size(free)} free - {_size(growth)} still to grow "
        f"for {len(running)} running - {_size(margin)} margin)"
    )
    if next_peak <= room:
        return PackingDecision(True, f"start: {figures}")
    return PackingDecision(False, f"wait: {figures}")


def _size(count: int) -> str:
    return f"{count / GiB:.1f} GiB"
