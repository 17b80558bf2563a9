"""What every multi-process strategy shares: the process group, collectives, samplers and checkpoint files.

DDP, FSDP and DeepSpeed differ in how they wrap the model and step the optimizer; they start processes, split data,
gather evaluation outputs and write shared files the same way, so that lives here once.
"""

from __future__ import annotations

import atexit
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch.utils.data import Dataset, Sampler

from trainer import distributed
from trainer.precision import check_precision
from trainer.rank_layout import RankLayout, rank_layout
from trainer.safe_load import load_torch_file as _safe_torch_load
from trainer.safe_load import require_weights_file
from trainer.strategies.base import Strategy

MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.pt"
SCHEDULER_FILE = "scheduler.pt"
DEFAULT_TIMEOUT_S = 1800.0


class ParallelStrategy(Strategy):
    """Data parallel over the ranks a launcher started (or a world of one when started by plain `python`)."""

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self._owns_process_group = False

    @property
    def timeout_s(self) -> float:
        return float(getattr(self.args, "ddp_timeout", None) or DEFAULT_TIMEOUT_S)

    def setup_environment(self) -> None:
        layout = rank_layout()
        self.rank, self.local_rank, self.world_size = layout.rank, layout.local_rank, layout.world_size
        self.device = distributed.pick_device(layout.local_rank, getattr(self.args, "use_cpu", False))
        check_precision(
            self.args, self.device
        )  # fp16 on CPU fails here, on every rank, before any collective
        if self._init_process_group(layout) and not self._owns_process_group:
            self._owns_process_group = True
            # Release the group at exit even when the caller never calls teardown(): a rank that exits with live gloo
            # (and DeepSpeed shared-memory) threads can abort in C++ ("terminate called ...") and fail the job.
            atexit.register(self.teardown)

    def _init_process_group(self, layout: RankLayout) -> bool:
        backend = getattr(
            self.args, "ddp_backend", None
        )  # transformers' ddp_backend; None: nccl on GPU, else gloo
        return distributed.init_process_group(layout, self.device, self.timeout_s, backend)

    def teardown(self) -> None:
        if self._owns_process_group:
            distributed.destroy_process_group()
            self._owns_process_group = False

    # ---- collectives ---------------------------------------------------------------------------------------
    def barrier(self) -> None:
        distributed.barrier()

    def reduce_mean(self, value: torch.Tensor) -> torch.Tensor:
        return distributed.reduce_mean(value)

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        return distributed.broadcast_object(obj, src)

    def gather_for_eval(self, tensor: torch.Tensor) -> torch.Tensor:
        return distributed.gather_for_eval(tensor)

    # ---- data ------------------------------------------------------------------------------------------------
    def train_sampler(self, dataset: Dataset, shuffle: bool, seed: int) -> Sampler | None:
        drop_last = bool(getattr(self.args, "dataloader_drop_last", False))
        return distributed.DistributedTrainSampler(
            dataset, self.world_size, self.rank, shuffle, seed, drop_last
        )

    def eval_sampler(self, dataset: Dataset) -> Sampler | None:
        batch_size = int(getattr(self.args, "per_device_eval_batch_size", 8))
        return distributed.DistributedEvalSampler(dataset, self.world_size, self.rank, batch_size)

    @property
    def save_only_model(self) -> bool:
        return bool(getattr(self.args, "save_only_model", False))

    # ---- files written by rank 0 -------------------------------------------------------------------------
    def write_model_file(self, directory: Path, state_dict: dict[str, torch.Tensor]) -> None:
        if self.is_global_zero:
            save_weights(state_dict, Path(directory) / MODEL_FILE)

    def write_torch_file(self, path: Path, obj: Any) -> None:
        if self.is_global_zero and obj is not None:
            torch.save(obj, path)


def save_weights(state_dict: dict[str, torch.Tensor], path: Path) -> None:
    # safetensors refuses tensors that share storage (tied weights); a contiguous copy of each breaks the sharing.
    tensors = {name: tensor.detach().to("cpu").contiguous().clone() for name, tensor in state_dict.items()}
    save_file(tensors, str(path), metadata={"format": "pt"})


def load_weights(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(require_weights_file(path)))  # safetensors only: never a pickle in its place


def load_torch_file(path: Path) -> Any:
    return _safe_torch_load(path, map_location="cpu")


def save_scheduler(directory: Path, scheduler: Any, strategy: ParallelStrategy) -> None:
    if scheduler is not None and hasattr(scheduler, "state_dict"):
        strategy.write_torch_file(Path(directory) / SCHEDULER_FILE, scheduler.state_dict())


def load_scheduler(directory: Path, scheduler: Any) -> None:
    path = Path(directory) / SCHEDULER_FILE
    if scheduler is not None and path.exists():
        scheduler.load_state_dict(load_torch_file(path))
