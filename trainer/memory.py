"""Memory figures of the Trainer's phases, with the names and meaning of transformers' `TrainerMemoryTracker`.

With `skip_memory_metrics=False` (the default is True, as in transformers) each phase reports, in bytes:

    <stage>_mem_cpu_alloc_delta    process RSS at the end of the phase minus RSS at its start (negative when it freed)
    <stage>_mem_cpu_peaked_delta   peak RSS during the phase above the RSS at its end (never negative)
    <stage>_mem_gpu_alloc_delta    the same from torch.cuda.memory_allocated, when the Trainer runs on CUDA
    <stage>_mem_gpu_peaked_delta   ... and torch.cuda.max_memory_allocated

`alloc_delta + peaked_delta` is what the phase needed. Stages: `init` (Trainer.__init__), `train`, `eval`, `test`
(predict). The init figures, with `before_init_mem_cpu` / `before_init_mem_gpu` (the usage when __init__ began), are
added to the first phase reported after it. A phase called inside another (evaluation during training, one dataset of
a dict) is counted in the outer one: the peak counters are process-wide, so they cannot be nested.

Independently of `skip_memory_metrics`, every train() records the absolute peaks of the run (`RunPeaks`): peak RSS,
and on CUDA the peak memory PyTorch allocated and reserved. They cost two counter resets and reads per train() and no
thread: the kernel keeps the RSS high-water mark (VmHWM, reset through /proc/self/clear_refs), CUDA's caching
allocator keeps its own peaks. Where the kernel counter cannot be reset (not Linux), a phase's CPU peak is sampled by
a thread every few milliseconds instead, which can miss a short peak (transformers' tracker samples too).
"""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

import psutil
import torch

STAGES = ("init", "train", "eval", "test")
_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")
_SAMPLE_INTERVAL_S = 0.005

Method = TypeVar("Method", bound=Callable[..., Any])


@dataclass(frozen=True)
class RunPeaks:
    """Absolute peaks of one training run, in bytes. The GPU figures are None when the run was not on CUDA.

    `gpu_reserved` is what PyTorch's caching allocator held at most: the part of the process's GPU footprint that
    grows with the trial (NVML also counts the CUDA context, a few hundred MB, on top)."""

    cpu_rss: int
    gpu_allocated: int | None = None
    gpu_reserved: int | None = None

    def as_metrics(self, prefix: str = "train") -> dict[str, int]:
        metrics = {f"{prefix}_mem_cpu_peak": self.cpu_rss}
        if self.gpu_allocated is not None:
            metrics[f"{prefix}_mem_gpu_peak_allocated"] = self.gpu_allocated
            metrics[f"{prefix}_mem_gpu_peak_reserved"] = self.gpu_reserved
        return metrics

    def to_dict(self) -> dict[str, int | None]:
        return asdict(self)


class RssPeakCounter:
    """The process's peak RSS since the last reset: the kernel's high-water mark where it can be reset, else a
    sampling thread."""

    def __init__(self) -> None:
        self._process = psutil.Process()
        self._kernel = _kernel_counter_resettable()
        self._sampled_peak = 0
        self._stop_sampling = threading.Event()
        self._sampler: threading.Thread | None = None

    def rss(self) -> int:
        return self._process.memory_info().rss

    def reset(self) -> None:
        if self._kernel:
            _CLEAR_REFS.write_text("5")  # 5: reset the peak RSS (VmHWM) to the current RSS
            return
        self._stop_sampler()
        self._sampled_peak = self.rss()
        self._stop_sampling.clear()
        self._sampler = threading.Thread(target=self._sample, name="rss-peak", daemon=True)
        self._sampler.start()

    def peak(self) -> int:
        if self._kernel:
            return _high_water_mark()
        return max(self._sampled_peak, self.rss())

    def stop(self) -> None:
        self._stop_sampler()

    def _sample(self) -> None:
        while True:
            self._sampled_peak = max(self._sampled_peak, self.rss())
            if self._stop_sampling.wait(_SAMPLE_INTERVAL_S):
                return

    def _stop_sampler(self) -> None:
        if self._sampler is not None:
            self._stop_sampling.set()
            self._sampler.join()
            self._sampler = None


def _kernel_counter_resettable() -> bool:
    try:
        _CLEAR_REFS.write_text("5")
        _high_water_mark()
    except (OSError, ValueError):
        return False
    return True


def _high_water_mark() -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024  # the kernel writes kB
    raise ValueError(f"{_STATUS} has no VmHWM line")


@dataclass
class _Readings:
    cpu_begin: int
    gpu_begin: int | None


class MemoryTracker:
    """Measures the Trainer's phases. One per Trainer; `start`/`stop` bracket a phase, `track_memory` wraps a method."""

    def __init__(self, skip_memory_metrics: bool, device: torch.device) -> None:
        self.skip = skip_memory_metrics
        self.cuda = device if device.type == "cuda" else None
        self.rss = RssPeakCounter()
        self.stage: str | None = None
        self._begin: _Readings | None = None
        self._figures: dict[str, dict[str, int]] = {}
        self._init_reported = False

    # ---- phases ----------------------------------------------------------------------------------------------
    def start(self, stage: str) -> bool:
        """Begin measuring `stage`; False (and nothing measured) inside another phase or when nothing is measured."""
        if stage not in STAGES:
            raise ValueError(f"unknown memory stage {stage!r}; one of {STAGES}")
        if self.stage is not None or (self.skip and stage != "train"):
            return False
        self.stage = stage
        if not self.skip:
            gc.collect()  # count what the phase keeps, not garbage the phase before it left behind
        self.rss.reset()
        if self.cuda is not None:
            torch.cuda.reset_peak_memory_stats(self.cuda)
        self._begin = _Readings(self.rss.rss(), self._gpu_allocated())
        return True

    def stop(self, stage: str, metrics: dict[str, Any] | None = None) -> RunPeaks | None:
        """End `stage` if it is the one being measured: add its figures to `metrics` (and, for train, the run's
        absolute peaks) unless `skip_memory_metrics`. Returns the absolute peaks of the phase, None for a nested call."""
        if self.stage != stage or self._begin is None:
            return None
        peaks = self._peaks()
        if not self.skip:
            gc.collect()
            self._record_deltas(stage)
        self.abandon()
        if metrics is not None:
            if stage == "train" and not self.skip:
                # As transformers: no memory figures in the metrics unless asked for (they differ between a run and
                # its resumed copy, and ported code compares those); `state.peak_memory` holds them either way.
                metrics.update(peaks.as_metrics())
            self._report(stage, metrics)
        return peaks

    def abandon(self) -> None:
        """Forget the current phase without reporting it (it raised)."""
        self.stage, self._begin = None, None
        self.rss.stop()

    # ---- figures ---------------------------------------------------------------------------------------------
    def _gpu_allocated(self) -> int | None:
        return torch.cuda.memory_allocated(self.cuda) if self.cuda is not None else None

    def _peaks(self) -> RunPeaks:
        if self.cuda is None:
            return RunPeaks(cpu_rss=self.rss.peak())
        return RunPeaks(
            cpu_rss=self.rss.peak(),
            gpu_allocated=torch.cuda.max_memory_allocated(self.cuda),
            gpu_reserved=torch.cuda.max_memory_reserved(self.cuda),
        )

    def _record_deltas(self, stage: str) -> None:
        begin, cpu_end, cpu_peak = self._begin, self.rss.rss(), self.rss.peak()
        figures = {
            "cpu_begin": begin.cpu_begin,
            "cpu_alloc": cpu_end - begin.cpu_begin,
            "cpu_peaked": max(0, cpu_peak - cpu_end),
        }
        if self.cuda is not None:
            gpu_end = torch.cuda.memory_allocated(self.cuda)
            figures["gpu_begin"] = begin.gpu_begin
            figures["gpu_alloc"] = gpu_end - begin.gpu_begin
            figures["gpu_peaked"] = max(0, torch.cuda.max_memory_allocated(self.cuda) - gpu_end)
        self._figures[stage] = figures

    def _report(self, stage: str, metrics: dict[str, Any]) -> None:
        if self.skip or stage == "init":
            return  # __init__ has no metrics of its own: its figures ride with the next phase
        stages = [stage]
        if not self._init_reported and "init" in self._figures:
            stages.insert(0, "init")
            self._init_reported = True
        for name in stages:
            figures = self._figures[name]
            for kind in ("alloc", "peaked"):
                metrics[f"{name}_mem_cpu_{kind}_delta"] = figures[f"cpu_{kind}"]
                if f"gpu_{kind}" in figures:
                    metrics[f"{name}_mem_gpu_{kind}_delta"] = figures[f"gpu_{kind}"]
        if stages[0] == "init":
            metrics["before_init_mem_cpu"] = self._figures["init"]["cpu_begin"]
            if "gpu_begin" in self._figures["init"]:
                metrics["before_init_mem_gpu"] = self._figures["init"]["gpu_begin"]


def track_memory(
    stage: str, metrics_of: Callable[[Any], dict[str, Any] | None] = lambda result: None
) -> Callable[[Method], Method]:
    """Measure a Trainer method as phase `stage` (through the Trainer's `_memory`), adding the figures to the metrics
    `metrics_of(result)` returns, after the method has run (as transformers does for evaluate and predict). A method
    that stops the phase itself earlier (train, to log the figures) is left alone; one that raises is not reported."""

    def wrap(method: Method) -> Method:
        @functools.wraps(method)
        def measured(self: Any, *args: Any, **kwargs: Any) -> Any:
            tracker: MemoryTracker = self._memory
            owner = tracker.start(stage)
            try:
                result = method(self, *args, **kwargs)
            except BaseException:
                if owner:
                    tracker.abandon()
                raise
            if owner:
                tracker.stop(stage, metrics_of(result))
            return result

        return measured  # type: ignore[return-value]

    return wrap


def empty_device_cache(device: torch.device) -> None:
    """Return the accelerator's cached, unused memory to the driver (`torch_empty_cache_steps`); nothing on a CPU."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif device.type == "mps":
        torch.mps.empty_cache()
    elif device.type == "xpu":
        torch.xpu.empty_cache()
