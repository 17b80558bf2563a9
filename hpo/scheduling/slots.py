"""Slots: where trials run. One slot is one worker process: a set of GPUs (CUDA_VISIBLE_DEVICES) or a share of the CPU.

    --gpus 0,1,3 (or every GPU nvidia-smi lists)  x  resources.gpus_per_trial   -> one slot per group of k GPUs
                                                  x  resources.trials_per_gpu   -> that many slots per GPU (k = 1);
                                                     `auto`: as many as the cores allow (threads_per_trial each, at
                                                     least 1); a number is capped by the cores too. Whether a slot's
                                                     next trial may start beside the others is the worker's GPU gate
                                                     (hpo.scheduling.gpu_gate: NVML free memory against measured peaks)
    no GPU, or --workers N                        -> N CPU slots of resources.threads_per_trial threads each
    no GPU and no --workers / resources.workers   -> usable cores // (threads_per_trial x ranks) slots, as Ray Tune
                                                     fills the cores (1 slot with every core when threads are unset)

GPUs are found without initialising CUDA in this process (nvidia-smi; torch only in a throwaway subprocess), because a
process that initialised CUDA cannot fork workers that use it, and each worker must choose its devices before torch
starts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hpo.errors import ConfigError
from hpo.scheduling.devices import DeviceId, visible_devices
from hpo.spec.sections import ResourcesSpec


@dataclass(frozen=True)
class Slot:
    index: int
    devices: tuple[DeviceId, ...]  # GPU ids; empty on CPU
    ranks: int  # processes per trial (a distributed trial when > 1)
    threads: int  # torch threads per rank
    # resources.trials_per_gpu on a GPU slot (a number or "auto"); 1: the GPU is this slot's alone.
    packing: int | str = 1
    # Which of the slots packed on the same GPU this is (1, 2, ...); 0: the only slot on its GPUs.
    share: int = 0

    @property
    def label(self) -> str:
        """How the slot is named wherever it shows (run's start line, live table, trials' `slot`, dashboard lanes):
        "cpu 1", "gpu 0,1", and "gpu 0 #2" for the second of the slots sharing GPU 0, so no two slots read alike."""
        if not self.devices:
            return f"cpu {self.index}"
        return f"gpu {','.join(map(str, self.devices))}" + (f" #{self.share}" if self.share else "")

    def environment(self) -> dict[str, str]:
        """Variables the worker process starts with, so that torch sees only this slot's devices and threads."""
        env = {"OMP_NUM_THREADS": str(self.threads), "MKL_NUM_THREADS": str(self.threads)}
        # A CPU slot hides the GPUs, so that a trial meant for the CPU does not pick one up on a GPU machine.
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, self.devices))
        if self.devices:
            # The ids are NVML's (nvidia-smi's, by PCI bus); CUDA numbers GPUs the same way only with this set.
            env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
            # torch.cuda.is_available() in the worker would otherwise initialise the driver (cuInit), after which
            # its forked trials could not use CUDA; the NVML check leaves the driver alone.
            env["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
        return env


def discover_gpus() -> list[DeviceId]:
    """GPU ids this process may use: CUDA_VISIBLE_DEVICES when set, else what nvidia-smi lists."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return visible_devices(visible)
    if shutil.which("nvidia-smi"):
        try:
            listing = subprocess.run(
                ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
                check=True,
            ).stdout
            return [int(line) for line in listing.split() if line.strip().isdigit()]
        except (subprocess.SubprocessError, OSError, ValueError):
            pass
    if Path("/dev/nvidia0").exists():  # a driver but no nvidia-smi (some containers): ask torch, elsewhere
        return list(range(_torch_device_count()))
    return []


def _torch_device_count() -> int:
    code = "import torch; print(torch.cuda.device_count())"
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
        return int(out.strip() or 0)
    except (subprocess.SubprocessError, OSError, ValueError):
        return 0


def make_slots(
    resources: ResourcesSpec,
    *,
    gpus: Sequence[DeviceId] | None = None,
    workers: int | None = None,
    ranks_per_trial: int | None = None,
    cpu_count: int | None = None,
    available_gpus: Sequence[DeviceId] | None = None,
) -> list[Slot]:
    """The slots for this machine. `gpus` (--gpus) wins, then `workers` (--workers, or resources.workers: CPU), then
    the GPUs found. resources.workers counts as --workers does: the start-up line offers both to set CPU workers, so
    on a GPU machine a file that names its workers gets them, not one trial on the GPU."""
    cpus = cpu_count or len(os.sched_getaffinity(0))
    if gpus is not None:
        found = list(available_gpus) if available_gpus is not None else discover_gpus()
        return gpu_slots(resources, _checked_gpus(gpus, found), cpus)
    if workers is None and resources.workers is None:
        found = list(available_gpus) if available_gpus is not None else discover_gpus()
        if found:
            return gpu_slots(resources, found, cpus)
    return cpu_slots(resources, workers, ranks_per_trial, cpus)


def _checked_gpus(gpus: Sequence[DeviceId], found: Sequence[DeviceId]) -> list[DeviceId]:
    chosen = list(dict.fromkeys(gpus))
    if not chosen:
        raise ConfigError("--gpus: name at least one GPU, e.g. --gpus 0,1")
    missing = [g for g in chosen if g not in found]
    if missing:
        have = ",".join(map(str, found)) or "none"
        raise ConfigError(f"--gpus: GPU {','.join(map(str, missing))} not found (this machine has: {have})")
    return chosen


def gpu_slots(resources: ResourcesSpec, gpu_ids: Sequence[DeviceId], cpus: int) -> list[Slot]:
    per_trial = resources.gpus_per_trial
    per_gpu = resources.trials_per_gpu
    if per_trial > len(gpu_ids):
        raise ConfigError(
            f"resources.gpus_per_trial: {per_trial} GPUs per trial, but only {len(gpu_ids)} GPU(s) to use "
            f"({','.join(map(str, gpu_ids))}); lower it or pass more with --gpus"
        )
    groups = [tuple(gpu_ids[i : i + per_trial]) for i in range(0, len(gpu_ids) - per_trial + 1, per_trial)]
    if per_trial == 1 and per_gpu != 1:
        groups = [group for group in groups for _ in range(_slots_per_gpu(resources, len(groups), cpus))]
    ranks = resources.ranks_per_trial
    if ranks is not None and ranks != per_trial:
        raise ConfigError(
            f"resources.ranks_per_trial: {ranks} ranks per trial, but on GPUs each rank drives one GPU and "
            f"gpus_per_trial is {per_trial}; set gpus_per_trial: {ranks} instead, or run the ranks on CPU with --workers N"
        )
    threads = resources.threads_per_trial or default_threads(cpus, len(groups), per_trial)
    packing = per_gpu if per_trial == 1 else 1
    shares = _shares(groups)
    return [Slot(i, group, per_trial, int(threads), packing, shares[i]) for i, group in enumerate(groups)]


def _shares(groups: Sequence[tuple[DeviceId, ...]]) -> list[int]:
    """For each slot, its number among the slots on the same GPUs (1, 2, ...), or 0 where it has them alone."""
    seen: dict[tuple[DeviceId, ...], int] = {}
    numbers = []
    for group in groups:
        seen[group] = seen.get(group, 0) + 1
        numbers.append(seen[group])
    return [number if groups.count(group) > 1 else 0 for group, number in zip(groups, numbers, strict=True)]


def _slots_per_gpu(resources: ResourcesSpec, gpus: int, cpus: int) -> int:
    """Slots per GPU when trials share GPUs: every slot needs its threads (at least one core), so the cores bound
    the packing; `auto` takes as many as they allow, a number at most that many."""
    by_cores = max(1, cpus // ((resources.threads_per_trial or 1) * gpus))
    wanted = resources.trials_per_gpu
    return by_cores if wanted == "auto" else min(int(wanted), by_cores)


def cpu_slots(
    resources: ResourcesSpec, workers: int | None, ranks_per_trial: int | None, cpus: int
) -> list[Slot]:
    ranks = ranks_per_trial or resources.ranks_per_trial or 1
    count = workers or resources.workers or default_workers(cpus, resources.threads_per_trial, int(ranks))
    if count < 1:
        raise ConfigError(f"--workers: must be at least 1, got {count}")
    threads = resources.threads_per_trial or default_threads(cpus, int(count), int(ranks))
    return [Slot(i, (), int(ranks), int(threads)) for i in range(int(count))]


def default_workers(cpus: int, threads_per_trial: int | None, ranks: int) -> int:
    """CPU workers when neither --workers nor resources.workers is given: as many trials as the usable cores hold at
    `threads_per_trial` threads per rank. Without threads_per_trial a trial may use every core: one worker."""
    if threads_per_trial is None:
        return 1
    return max(1, cpus // (threads_per_trial * ranks))


def default_threads(cpus: int, slots: int, ranks: int) -> int:
    """threads_per_trial when the file gives none: the cores shared by every rank that runs at once, at least 1."""
    return max(1, cpus // (slots * ranks))


def describe_slots(slots: Sequence[Slot], cpus: int | None = None) -> str:
    """One line for the start of a run: how many trials run at once, on what, and how to change it."""
    if not slots:
        return "no slots"
    first = slots[0]
    threads = f"{first.threads} thread{'s' if first.threads > 1 else ''}"
    ranks = f" x {first.ranks} ranks" if first.ranks > 1 else ""
    if first.devices:
        gpus = ", ".join(s.label for s in slots)
        return f"{len(slots)} trial(s) at a time ({gpus}; {threads}{ranks}); choose GPUs with --gpus 0,1"
    cores = cpus or len(os.sched_getaffinity(0))
    return (
        f"{len(slots)} trial(s) at a time on CPU ({threads}{ranks} each, {cores} usable cores); change with "
        "--workers N or resources.workers / resources.threads_per_trial"
    )
