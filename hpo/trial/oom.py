"""CUDA out of memory: recognise it (an exception, or its text in a trial process's traceback) and say it in one line.

PyTorch's caching allocator (c10/cuda/CUDACachingAllocator.cpp) raises `torch.OutOfMemoryError` (also
`torch.cuda.OutOfMemoryError`) with a paragraph such as:

    CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 12.44 GiB is
    free. Process 4242 has 30.12 GiB memory in use. Including non-PyTorch memory, this process has 36.50 GiB memory
    in use. Of the allocated memory 35.80 GiB is allocated by PyTorch, and 180.00 MiB is reserved by PyTorch but
    unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=...

(before torch 2.1: "... Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity; 60.00 GiB already allocated;
1.20 GiB free; 61.00 GiB reserved in total by PyTorch)"). Sizes are printed as `bytes`, KiB, MiB or GiB with two
decimals. Other CUDA calls that run out of memory report "CUDA error: out of memory" or CUBLAS_STATUS_ALLOC_FAILED.
This module imports no torch: a parent process that reads a child's traceback must not pay for it.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

FIX = "use a smaller per_device_train_batch_size, set auto_find_batch_size: true, or gradient_checkpointing: true"

_SIZE = r"([\d.]+ (?:bytes|KiB|MiB|GiB))"
_UNITS = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
_OOM_TEXT = re.compile(
    r"CUDA out of memory|CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED"
)
_REQUESTED = re.compile(rf"Tried to allocate {_SIZE}")
_CURRENT = re.compile(rf"GPU (\d+) has a total capacity of {_SIZE} of which {_SIZE} is free")
_CURRENT_ALLOCATED = re.compile(rf"Of the allocated memory {_SIZE} is allocated by PyTorch")
_CURRENT_RESERVED = re.compile(rf"and {_SIZE} is reserved by PyTorch but unallocated")
_OTHER_PROCESS = re.compile(rf"Process \d+ has {_SIZE} memory in use")
_BEFORE_2_1 = re.compile(
    rf"\(GPU (\d+); {_SIZE} total capacity; {_SIZE} already allocated; {_SIZE} free;"
    rf"(?: {_SIZE} allowed;)? {_SIZE} reserved in total by PyTorch\)"
)


@dataclass(frozen=True)
class OutOfMemory:
    """What an out-of-memory message says, in bytes; None where the message does not say."""

    requested: int | None = None
    gpu: int | None = None
    total: int | None = None
    free: int | None = None
    allocated_by_pytorch: int | None = None
    reserved_unallocated: int | None = None
    other_processes: int = 0  # held by other processes on the GPU (their sum): the GPU was shared

    def one_line(self) -> str:
        """What was asked, what the GPU had, and the fix."""
        asked = f"asked for {_show(self.requested)}" if self.requested is not None else "ran out"
        where = f" on GPU {self.gpu}" if self.gpu is not None else ""
        parts = []
        if self.free is not None and self.total is not None:
            parts.append(f"{_show(self.free)} free of {_show(self.total)}")
        if self.allocated_by_pytorch is not None:
            parts.append(f"{_show(self.allocated_by_pytorch)} allocated by this trial's PyTorch")
        if self.other_processes:
            parts.append(f"{_show(self.other_processes)} held by other processes")
        had = f" ({'; '.join(parts)})" if parts else ""
        return f"CUDA out of memory: the trial {asked}{where}{had}; {FIX}"


def is_cuda_oom(error: BaseException | str) -> bool:
    """Whether `error` (an exception, or traceback text) is a CUDA out-of-memory failure, also when it was the
    cause of the exception that ended the trial."""
    if isinstance(error, str):
        return bool(_OOM_TEXT.search(error))
    return _find_oom(error) is not None


def parse_oom(error: BaseException | str) -> OutOfMemory | None:
    """The figures of a CUDA out-of-memory failure; None when `error` is not one."""
    if isinstance(error, BaseException):
        found = _find_oom(error)
        if found is None:
            return None
        text = str(found)
    else:
        text = error
        if not _OOM_TEXT.search(text):
            return None
    return _figures(text)


def describe_oom(error: BaseException | str) -> str | None:
    """The one line for a CUDA out-of-memory failure (for the trial's stored error and the log); None otherwise."""
    figures = parse_oom(error)
    return figures.one_line() if figures is not None else None


def _find_oom(error: BaseException) -> BaseException | None:
    torch = sys.modules.get("torch")  # not imported: then no exception can be torch's
    oom_type = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if (oom_type is not None and isinstance(current, oom_type)) or _OOM_TEXT.search(str(current)):
            return current
        current = current.__cause__ or current.__context__
    return None


def _figures(text: str) -> OutOfMemory:
    requested = _bytes(_REQUESTED, text)
    current = _CURRENT.search(text)
    if current:
        return OutOfMemory(
            requested=requested,
            gpu=int(current.group(1)),
            total=_to_bytes(current.group(2)),
            free=_to_bytes(current.group(3)),
            allocated_by_pytorch=_bytes(_CURRENT_ALLOCATED, text),
            reserved_unallocated=_bytes(_CURRENT_RESERVED, text),
            other_processes=sum(_to_bytes(size) for size in _OTHER_PROCESS.findall(text)),
        )
    old = _BEFORE_2_1.search(text)
    if old:
        allocated, reserved = _to_bytes(old.group(3)), _to_bytes(old.group(6))
        return OutOfMemory(
            requested=requested,
            gpu=int(old.group(1)),
            total=_to_bytes(old.group(2)),
            free=_to_bytes(old.group(4)),
            allocated_by_pytorch=allocated,
            reserved_unallocated=reserved - allocated,
        )
    return OutOfMemory(requested=requested)


def _bytes(pattern: re.Pattern[str], text: str) -> int | None:
    match = pattern.search(text)
    return _to_bytes(match.group(1)) if match else None


def _to_bytes(size: str) -> int:
    number, unit = size.split()
    return round(float(number) * _UNITS[unit])


def _show(count: int) -> str:
    for unit in ("GiB", "MiB", "KiB"):
        if count >= _UNITS[unit]:
            return f"{count / _UNITS[unit]:.2f} {unit}"
    return f"{count} bytes"
