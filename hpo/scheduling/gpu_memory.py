"""GPU memory as NVML sees it (total, free, used, and what each process holds), read without CUDA.

NVML is the driver's management library (nvidia-smi reads it). Asking it does not initialise CUDA, so the scheduler
may read memory as often as it likes and still fork workers that use CUDA; this module never imports torch.
Where there is no NVML (no driver, no `nvidia-ml-py`) or no GPU, the answer is an empty list, never an error.

Which GPUs: the ids as CUDA_VISIBLE_DEVICES writes them: indices, or UUIDs (`GPU-…`, `MIG-…`, or a unique prefix of
one, as CUDA accepts). Like CUDA, the list ends at the first id that names no device. Indices are NVML's (nvidia-smi's),
which number GPUs by PCI bus; CUDA numbers them so too only under CUDA_DEVICE_ORDER=PCI_BUS_ID (its default,
FASTEST_FIRST, agrees when every GPU is the same model), so a scheduler that hands out indices sets that variable.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class NvmlDevice:
    """One device NVML lists: a GPU, or a MIG instance inside one (`index` is then the GPU's index)."""

    index: int
    uuid: str
    mig: bool = False


@dataclass(frozen=True)
class GpuMemory:
    """One device's memory in bytes. `processes` maps the pid of each compute process to the bytes it holds (NVML
    reports host pids: inside a container they may not be the pids this process sees)."""

    index: int
    uuid: str
    name: str
    total: int
    free: int
    used: int
    processes: dict[int, int] = field(default_factory=dict)


def visible_device_ids(environ: dict[str, str] | None = None) -> list[str] | None:
    """The entries of CUDA_VISIBLE_DEVICES, or None when it is not set (every GPU is visible)."""
    value = (environ if environ is not None else os.environ).get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    return [part.strip() for part in value.split(",")] if value.strip() else []


def resolve_devices(ids: Sequence[str | int] | None, devices: Sequence[NvmlDevice]) -> list[NvmlDevice]:
    """The devices `ids` name, in their order; every GPU when `ids` is None. Stops at the first id that names no
    device (CUDA ignores the rest of CUDA_VISIBLE_DEVICES too, e.g. after `-1`)."""
    gpus = [device for device in devices if not device.mig]
    if ids is None:
        return gpus
    chosen: list[NvmlDevice] = []
    for entry in map(str, ids):
        device = _by_index(entry, gpus) if entry.lstrip("-").isdigit() else _by_uuid(entry, devices)
        if device is None:
            break
        chosen.append(device)
    return chosen


def _by_index(entry: str, gpus: Sequence[NvmlDevice]) -> NvmlDevice | None:
    index = int(entry)
    return next((gpu for gpu in gpus if gpu.index == index), None)


def _by_uuid(entry: str, devices: Sequence[NvmlDevice]) -> NvmlDevice | None:
    matches = [device for device in devices if device.uuid.startswith(entry)]
    return matches[0] if len(matches) == 1 else None  # CUDA accepts a prefix only when it is unique


def read_gpu_memory(ids: Sequence[str | int] | None = None) -> list[GpuMemory]:
    """Memory of the GPUs `ids` names (default: those CUDA_VISIBLE_DEVICES shows this process, else every GPU).
    One-shot: a caller that reads every few seconds keeps a `GpuMemoryReader` open instead."""
    with open_reader() as reader:
        return reader.read(ids) if reader is not None else []


@contextmanager
def open_reader() -> Iterator[GpuMemoryReader | None]:
    """A reader with NVML started, or None where NVML or a GPU is missing."""
    reader = GpuMemoryReader.open()
    try:
        yield reader
    finally:
        if reader is not None:
            reader.close()


class GpuMemoryReader:
    """NVML started once, read many times (nvmlInit takes milliseconds to tens of milliseconds)."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.devices = _list_devices(nvml)

    @classmethod
    def open(cls) -> GpuMemoryReader | None:
        try:
            import pynvml  # the nvidia-ml-py package
        except ImportError:
            return None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as error:  # no driver library, no GPU, a driver/library mismatch
            logger.debug("NVML is not available: %s", error)
            return None
        try:
            return cls(pynvml)
        except pynvml.NVMLError as error:
            logger.debug("NVML lists no devices: %s", error)
            pynvml.nvmlShutdown()
            return None

    def read(self, ids: Sequence[str | int] | None = None) -> list[GpuMemory]:
        wanted = visible_device_ids() if ids is None else ids
        return [self._memory(device) for device in resolve_devices(wanted, self.devices)]

    def close(self) -> None:
        self.nvml.nvmlShutdown()

    def _memory(self, device: NvmlDevice) -> GpuMemory:
        nvml = self.nvml
        handle = _handle(nvml, device)
        info = nvml.nvmlDeviceGetMemoryInfo(handle)
        return GpuMemory(
            index=device.index,
            uuid=device.uuid,
            name=_text(nvml.nvmlDeviceGetName(handle)),
            total=int(info.total),
            free=int(info.free),
            used=int(info.used),
            processes=_processes(nvml, handle),
        )


def _list_devices(nvml: Any) -> list[NvmlDevice]:
    devices = []
    for index in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        devices.append(NvmlDevice(index, _text(nvml.nvmlDeviceGetUUID(handle))))
        devices.extend(NvmlDevice(index, uuid, mig=True) for uuid in _mig_uuids(nvml, handle))
    return devices


def _mig_uuids(nvml: Any, handle: Any) -> list[str]:
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
        if current != nvml.NVML_DEVICE_MIG_ENABLE:
            return []
        slots = nvml.nvmlDeviceGetMaxMigDeviceCount(handle)
    except nvml.NVMLError:  # a GPU without MIG
        return []
    uuids = []
    for slot in range(slots):
        try:
            uuids.append(
                _text(nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)))
            )
        except nvml.NVMLError:  # an empty MIG slot
            continue
    return uuids


def _handle(nvml: Any, device: NvmlDevice) -> Any:
    if not device.mig:
        return nvml.nvmlDeviceGetHandleByIndex(device.index)
    return nvml.nvmlDeviceGetHandleByUUID(device.uuid)


def _processes(nvml: Any, handle: Any) -> dict[int, int]:
    try:
        running = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
    except nvml.NVMLError:  # not supported on some devices and drivers: the totals still stand
        return {}
    return {int(p.pid): int(p.usedGpuMemory) for p in running if p.usedGpuMemory is not None}


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
