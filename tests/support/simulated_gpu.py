"""A GPU for CPU machines: its memory as NVML would report it, and a test task's trials that believe they run on it.

    read_gpu(index)          NVML-shaped figures (`GpuMemory`) of a GPU of HPO_TEST_GPU_GIB GiB (default 12): each
                             live process with a file in HPO_TEST_GPU_DIR holds the bytes written in its file
    OnSimulatedGpu(gib=5)    a Trainer callback: from the first step the trial process holds `gib` GiB of that GPU;
                             at the end it reports a peak of `gib` - 1 GiB reserved by PyTorch (the GPU gate adds
                             1 GiB for the CUDA context), as the Trainer does on CUDA
        oom_at_step=N        at step N, when another trial is on the GPU and no trial has done so yet, raise a real
                             torch.cuda.OutOfMemoryError worded as PyTorch's caching allocator words it
        oom_always_at=N      at step N raise it whatever the GPU holds (a trial too big to run even alone)

The workers find `read_gpu` through HPO_GPU_MEMORY_READER=simulated_gpu:read_gpu or `run_trials(gpu_memory=...)`;
this file is copied next to the study file, whose folder is on PYTHONPATH for the workers.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch

from hpo.scheduling.gpu_gate import READER_VARIABLE
from hpo.scheduling.gpu_memory import GpuMemory
from trainer import TrainerCallback

GiB = 1 << 30
DIR_VARIABLE, SIZE_VARIABLE = "HPO_TEST_GPU_DIR", "HPO_TEST_GPU_GIB"


def read_gpu(index: int) -> GpuMemory:
    held = holders()
    total = int(float(os.environ.get(SIZE_VARIABLE, "12")) * GiB)
    used = sum(held.values())
    return GpuMemory(index, f"GPU-simulated-{index}", "Simulated GPU", total, total - used, used, held)


def holders() -> dict[int, int]:
    """pid -> bytes of every live process on the GPU."""
    held = {}
    for path in Path(os.environ[DIR_VARIABLE]).glob("pid-*"):
        pid = int(path.name.removeprefix("pid-"))
        if _alive(pid):
            held[pid] = int(path.read_text() or 0)
    return held


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (ProcessLookupError, OSError):
        return False
    return state not in ("Z", "X")


def environment(folder: Path, gib: float = 12) -> dict[str, str]:
    """The variables that put `hpo run` (or a pool's workers) on the simulated GPU 0."""
    gpu_dir = folder / "simulated-gpu"
    gpu_dir.mkdir(parents=True, exist_ok=True)
    path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    return {
        "CUDA_VISIBLE_DEVICES": "0",  # the scheduler makes a GPU slot; torch in the trials finds no CUDA: CPU
        DIR_VARIABLE: str(gpu_dir),
        SIZE_VARIABLE: str(gib),
        READER_VARIABLE: "simulated_gpu:read_gpu",
        "PYTHONPATH": path,
    }


def copy_next_to(folder: Path) -> None:
    shutil.copy(Path(__file__), folder / "simulated_gpu.py")


class OnSimulatedGpu(TrainerCallback):
    def __init__(
        self, gib: float = 5, oom_at_step: int | None = None, oom_always_at: int | None = None
    ) -> None:
        self.bytes = int(gib * GiB)
        self.oom_at_step, self.oom_always_at = oom_at_step, oom_always_at
        self.path = Path(os.environ[DIR_VARIABLE]) / f"pid-{os.getpid()}"

    def on_step_begin(self, args, state, control, **kwargs):
        self.path.write_text(str(self.bytes))
        step = state.global_step + 1
        if step == self.oom_always_at:
            raise torch.cuda.OutOfMemoryError(self._message(others=0))
        others = len(holders()) - 1
        if step == self.oom_at_step and others and self._first_oom():
            raise torch.cuda.OutOfMemoryError(self._message(others))

    def on_train_end(self, args, state, control, **kwargs):
        state.peak_memory["gpu_reserved"] = self.bytes - GiB
        self.path.unlink(missing_ok=True)

    def _first_oom(self) -> bool:
        try:
            os.close(os.open(self.path.with_name("oom-raised"), os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return False
        return True

    def _message(self, others: int) -> str:
        gpu = read_gpu(0)
        neighbours = "".join(
            f"Process {pid} has {held / GiB:.2f} GiB memory in use. "
            for pid, held in holders().items()
            if pid != os.getpid()
        )
        return (
            f"CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of {gpu.total / GiB:.2f} GiB "
            f"of which {gpu.free / GiB:.2f} GiB is free. {neighbours}Including non-PyTorch memory, this process has "
            f"{self.bytes / GiB:.2f} GiB memory in use. Of the allocated memory {(self.bytes - GiB) / GiB:.2f} GiB "
            "is allocated by PyTorch, and 20.00 MiB is reserved by PyTorch but unallocated. If reserved but "
            "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
            "fragmentation.  See documentation for Memory Management  "
            "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
        )
