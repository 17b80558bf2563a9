"""CUDA out of memory recognised (a real torch.OutOfMemoryError, or its text in a child's traceback) and told in one
line. The messages follow PyTorch's allocator (c10/cuda/CUDACachingAllocator.cpp), sizes as its format_size prints."""

from __future__ import annotations

import traceback

import pytest
import torch

from hpo.trial.oom import FIX, describe_oom, is_cuda_oom, parse_oom

GiB, MiB = 1 << 30, 1 << 20
H100_TOTAL = 85520809984


def format_size(size: int) -> str:
    """PyTorch's format_size: bytes up to 1 KiB, then KiB, MiB, GiB with two decimals."""
    for limit, unit, scale in ((1024, "bytes", 1), (MiB, "KiB", 1024), (GiB, "MiB", MiB)):
        if size <= limit:
            return f"{size} bytes" if unit == "bytes" else f"{size / scale:.2f} {unit}"
    return f"{size / GiB:.2f} GiB"


def allocator_message(requested: int, free: int, allocated: int, unallocated: int, others: list[int]) -> str:
    """The message of torch >= 2.1 for GPU 0 of an H100, with other processes holding `others` bytes each."""
    processes = "".join(
        f"Process {4242 + i} has {format_size(used)} memory in use. " for i, used in enumerate(others)
    )
    this = allocated + unallocated + (500 * MiB)
    return (
        f"CUDA out of memory. Tried to allocate {format_size(requested)}. GPU 0 has a total capacity of "
        f"{format_size(H100_TOTAL)} of which {format_size(free)} is free. {processes}Including non-PyTorch memory, "
        f"this process has {format_size(this)} memory in use. Of the allocated memory {format_size(allocated)} is "
        f"allocated by PyTorch, and {format_size(unallocated)} is reserved by PyTorch but unallocated. If reserved but "
        "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
        "fragmentation.  See documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


SHARED = allocator_message(20 * GiB, int(12.44 * GiB), int(35.8 * GiB), 180 * MiB, [int(30.12 * GiB)])


def raise_oom(message: str) -> None:
    raise torch.cuda.OutOfMemoryError(message)  # the class PyTorch raises; it can be built without a GPU


def test_a_real_out_of_memory_error_is_recognised_also_as_a_cause():
    with pytest.raises(torch.OutOfMemoryError) as caught:
        raise_oom(SHARED)
    assert is_cuda_oom(caught.value)
    try:
        try:
            raise_oom("CUDA out of memory. Tried to allocate 2.00 MiB.")
        except torch.OutOfMemoryError as error:
            raise RuntimeError("trial 3 failed") from error
    except RuntimeError as wrapped:
        assert is_cuda_oom(wrapped)
        assert "2.00 MiB" in describe_oom(wrapped)
    assert is_cuda_oom(torch.cuda.OutOfMemoryError("a message of another wording"))  # the type decides


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("mat1 and mat2 shapes cannot be multiplied (8x6 and 5x1)"),
        RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8589934592 bytes."),
        ValueError("out of range"),
    ],
)
def test_other_failures_are_not_out_of_memory(error):
    assert not is_cuda_oom(error) and parse_oom(error) is None and describe_oom(error) is None
    assert not is_cuda_oom("".join(traceback.format_exception(error)))


def test_the_long_message_becomes_one_line_with_what_was_asked_what_the_gpu_had_and_the_fix():
    line = describe_oom(torch.cuda.OutOfMemoryError(SHARED))
    assert line == (
        "CUDA out of memory: the trial asked for 20.00 GiB on GPU 0 (12.44 GiB free of 79.65 GiB; 35.80 GiB "
        f"allocated by this trial's PyTorch; 30.12 GiB held by other processes); {FIX}"
    )
    assert "\n" not in line
    assert {"per_device_train_batch_size", "auto_find_batch_size", "gradient_checkpointing"} <= set(
        word.strip(":,") for word in line.split()
    )


def test_a_child_traceback_gives_the_same_figures_in_bytes():
    try:
        raise_oom(SHARED)
    except torch.OutOfMemoryError as error:
        text = "".join(traceback.format_exception(error))  # what a trial process writes to its stderr
    assert "torch.OutOfMemoryError: CUDA out of memory." in text
    assert is_cuda_oom(text)
    figures = parse_oom(text)
    assert figures.requested == 20 * GiB and figures.gpu == 0
    assert figures.total == pytest.approx(H100_TOTAL, abs=0.005 * GiB)  # printed with two decimals
    assert figures.free == pytest.approx(12.44 * GiB, abs=0.005 * GiB)
    assert figures.allocated_by_pytorch == pytest.approx(35.8 * GiB, abs=0.005 * GiB)
    assert figures.reserved_unallocated == 180 * MiB
    assert figures.other_processes == pytest.approx(30.12 * GiB, abs=0.005 * GiB)
    assert describe_oom(text) == describe_oom(torch.cuda.OutOfMemoryError(SHARED))


def test_a_trial_alone_on_its_gpu_and_small_sizes():
    alone = allocator_message(512, 300, 79 * GiB, 2 * MiB, [])
    figures = parse_oom(alone)
    assert figures.requested == 512 and figures.free == 300 and figures.other_processes == 0
    assert describe_oom(alone).startswith(
        "CUDA out of memory: the trial asked for 512 bytes on GPU 0 (300 bytes free of 79.65 GiB; 79.00 GiB "
        "allocated by this trial's PyTorch); "
    )


def test_the_message_of_torch_before_2_1_and_of_other_cuda_calls():
    old = (
        "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 79.15 GiB total capacity; 60.00 GiB already "
        "allocated; 1.20 GiB free; 61.00 GiB reserved in total by PyTorch) If reserved memory is >> allocated "
        "memory try setting max_split_size_mb to avoid fragmentation."
    )
    figures = parse_oom(old)
    assert (figures.requested, figures.gpu) == (2 * GiB, 1)
    assert figures.allocated_by_pytorch == 60 * GiB and figures.reserved_unallocated == GiB
    assert describe_oom(old).startswith(
        "CUDA out of memory: the trial asked for 2.00 GiB on GPU 1 (1.20 GiB free"
    )
    for text in (
        "CUDA error: out of memory",
        "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate`",
    ):
        assert describe_oom(RuntimeError(text)) == f"CUDA out of memory: the trial ran out; {FIX}"
