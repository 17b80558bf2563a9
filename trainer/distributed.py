"""Process-group helpers shared by the multi-process strategies.

Everything here is a thin layer over `torch.distributed`: reading the rank layout a launcher put in the environment,
starting the process group with a collective timeout, samplers that split data across ranks, and the gather that
evaluation uses. Every function works on one process too (world size 1, no process group), so callers never branch.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import sys
from collections.abc import Iterator
from datetime import timedelta
from typing import NoReturn

import torch
import torch.distributed as dist
from torch.utils.data import Dataset, Sampler

from trainer.errors import TrainerConfigError
from trainer.rank_layout import RankLayout
from trainer.rank_layout import rank_layout as rank_layout  # still importable from here, as before the split


def default_backend(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


def pick_device(local_rank: int, use_cpu: bool = False) -> torch.device:
    """One CUDA device per local rank when CUDA is there and `use_cpu` is off; the CPU otherwise."""
    if use_cpu or not torch.cuda.is_available():
        return torch.device("cpu")
    if local_rank >= torch.cuda.device_count():
        raise TrainerConfigError(
            f"local rank {local_rank} has no GPU of its own: this machine shows {torch.cuda.device_count()} "
            "(CUDA_VISIBLE_DEVICES); start at most that many ranks per machine, or set use_cpu to run the ranks on CPU"
        )
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def init_process_group(
    layout: RankLayout, device: torch.device, timeout_s: float, backend: str | None = None
) -> bool:
    """Start the default process group unless one runs already. Returns True when this call started it.

    A world of one gets an in-memory store, so a strategy such as DDP also runs in a plain `python` process.
    The timeout bounds every collective: a rank that died leaves the others waiting at most this long.
    """
    if dist.is_initialized():
        return False
    backend = backend or default_backend(device)
    timeout = timedelta(seconds=timeout_s)
    if layout.world_size == 1 and "MASTER_ADDR" not in os.environ:
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
    else:
        _export_mpi_layout(layout)
        dist.init_process_group(backend, rank=layout.rank, world_size=layout.world_size, timeout=timeout)
    return True


def _export_mpi_layout(layout: RankLayout) -> None:
    # torch's env:// rendezvous reads RANK/WORLD_SIZE; MPI launchers only set their own names.
    os.environ.setdefault("RANK", str(layout.rank))
    os.environ.setdefault("WORLD_SIZE", str(layout.world_size))
    os.environ.setdefault("LOCAL_RANK", str(layout.local_rank))


def exit_rank(code: int = 0) -> NoReturn:
    """End a rank of a multi-rank job: run the atexit handlers (the strategy's process-group release, the trackers'
    flushes), flush the output, and leave without interpreter finalization.

    Why: under load, a DeepSpeed ZeRO-3 rank that had finished and released its process group sometimes aborted in C++
    destructors during finalization ("terminate called without an active exception"), turning a finished job into a
    failed one. Nothing of ours runs in that stage, so skipping it loses nothing."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def destroy_process_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def barrier() -> None:
    if world_size() > 1:
        dist.barrier()


def reduce_mean(value: torch.Tensor) -> torch.Tensor:
    """The mean of a tensor over all ranks (a copy; the input is left alone)."""
    if world_size() == 1:
        return value
    reduced = value.detach().clone()
    if reduced.dtype in (torch.bfloat16, torch.float16):
        reduced = reduced.float()  # gloo cannot sum half types
    dist.all_reduce(reduced, op=dist.ReduceOp.SUM)
    return (reduced / world_size()).to(value.dtype)


def broadcast_object(obj: object, src: int = 0) -> object:
    if world_size() == 1:
        return obj
    holder = [obj]
    dist.broadcast_object_list(holder, src=src)
    return holder[0]


def gather_for_eval(tensor: torch.Tensor, pad_index: int = -100) -> torch.Tensor:
    """Concatenate `tensor` from every rank along dim 0, rank 0's rows first.

    Ranks may hold different row counts and, for token outputs, different lengths in dim 1; both are padded for the
    collective (dim 1 with `pad_index`, as Hugging Face pads labels) and the padding rows are cut off again afterwards.
    Every rank gets the full result.
    """
    if world_size() == 1:
        return tensor
    dtype = tensor.dtype
    # gloo has no all_gather for every dtype (bf16 among them); float32 carries bf16/fp16 values exactly.
    payload = tensor.float() if dtype in (torch.bfloat16, torch.float16) else tensor
    shapes = _all_gather_shapes(payload)
    padded = _pad_to(payload, [max(s[d] for s in shapes) for d in range(payload.dim())], pad_index)
    pieces = [torch.empty_like(padded) for _ in shapes]
    dist.all_gather(pieces, padded.contiguous())
    trimmed = [piece[: shape[0]] for piece, shape in zip(pieces, shapes, strict=True)]
    return torch.cat(trimmed, dim=0).to(dtype)


def _all_gather_shapes(tensor: torch.Tensor) -> list[list[int]]:
    shape = torch.tensor(list(tensor.shape), dtype=torch.long, device=tensor.device)
    shapes = [torch.empty_like(shape) for _ in range(world_size())]
    dist.all_gather(shapes, shape)
    return [s.tolist() for s in shapes]


def _pad_to(tensor: torch.Tensor, target: list[int], pad_index: int) -> torch.Tensor:
    if list(tensor.shape) == target:
        return tensor
    out = tensor.new_full(target, pad_index)
    out[tuple(slice(0, n) for n in tensor.shape)] = tensor
    return out


class DistributedTrainSampler(Sampler[int]):
    """Each rank's share of one shuffled epoch; the shuffle is seeded with `seed + epoch` (call `set_epoch`).

    The permutation is the one a single process draws with `torch.randperm(n, generator=seeded(seed + epoch))`, and
    rank r takes positions r, r + W, r + 2W, ... of it. So the union of the ranks' k-th batches of size b is exactly the
    k-th batch of size W*b a single process would draw: W ranks at batch b train like one process at batch W*b.
    Without drop_last the tail is padded with the first indices so every rank takes the same number of steps.
    """

    def __init__(
        self, dataset: Dataset, num_replicas: int, rank: int, shuffle: bool, seed: int, drop_last: bool
    ):
        self.dataset_size = len(dataset)  # type: ignore[arg-type]
        self.num_replicas, self.rank = num_replicas, rank
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.epoch = 0
        if drop_last:
            self.num_samples = self.dataset_size // num_replicas
        else:
            self.num_samples = math.ceil(self.dataset_size / num_replicas)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def epoch_order(self) -> list[int]:
        if not self.shuffle:
            return list(range(self.dataset_size))
        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        return torch.randperm(self.dataset_size, generator=generator).tolist()

    def __iter__(self) -> Iterator[int]:
        order = self.epoch_order()
        total = self.num_samples * self.num_replicas
        if total > len(order):
            order += (order * math.ceil(total / max(len(order), 1)))[: total - len(order)]
        return iter(order[self.rank : total : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples


class DistributedEvalSampler(Sampler[int]):
    """Deals the single-process evaluation batches out to the ranks in turn: rank r reads global batches r, r+W, ...

    A loop that gathers each batch from every rank (rank order) therefore sees exactly the batches, and the order, of a
    single-process evaluation with the same batch size. Ranks left without a batch in the last round read one repeated
    row, so all ranks run the same number of batches; those padding rows come last in the gathered order, and
    `drop_eval_padding` cuts them off.
    """

    def __init__(self, dataset: Dataset, num_replicas: int, rank: int, batch_size: int):
        self.dataset_size = len(dataset)  # type: ignore[arg-type]
        self.num_replicas, self.rank, self.batch_size = num_replicas, rank, batch_size
        self.num_global_batches = math.ceil(self.dataset_size / batch_size)
        self.batches_per_rank = math.ceil(self.num_global_batches / num_replicas)

    def _batch(self, global_batch: int) -> list[int]:
        start = global_batch * self.batch_size
        rows = list(range(start, min(start + self.batch_size, self.dataset_size)))
        return rows or [self.dataset_size - 1]  # a padding row: this rank has no real batch in the last round

    def __iter__(self) -> Iterator[int]:
        for j in range(self.batches_per_rank):
            yield from self._batch(j * self.num_replicas + self.rank)

    def __len__(self) -> int:
        return sum(len(self._batch(j * self.num_replicas + self.rank)) for j in range(self.batches_per_rank))


def drop_eval_padding(gathered: torch.Tensor, dataset_size: int) -> torch.Tensor:
    """Keep the first `dataset_size` rows of a gather over `DistributedEvalSampler` batches: the rest repeat rows."""
    return gathered[:dataset_size]
