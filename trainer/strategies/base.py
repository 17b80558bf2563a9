"""The contract between the training loop and a parallelism strategy.

The loop in `trainer/trainer.py` never branches on a strategy's name: it asks the strategy object to place the model,
build the optimizer, run backward, clip, step, reduce, gather and save. One file per strategy implements this class
(Lightning Fabric's shape): `single.py`, `ddp.py`, `fsdp.py`, `deepspeed.py`.

Call order, as the loop uses it:

    strategy.setup_environment()                    # process group, device, env (once, before the model is built)
    model, optimizer, scheduler = strategy.setup(model, build_optimizer, build_scheduler)
    sampler = strategy.train_sampler(dataset, shuffle=True, seed=args.data_seed or args.seed)
    for each optimizer step:
        for each micro-batch of the accumulation window:
            with strategy.no_backward_sync(model, enabled=not last_micro_batch):
                loss = ...forward...
                strategy.backward(loss, model, optimizer)
        grad_norm = strategy.clip_grad_norm(model, optimizer, max_norm)   # None when max_norm is 0
        stepped = strategy.optimizer_step(model, optimizer)              # False when an fp16 step overflowed
        if stepped: scheduler.step()
        optimizer.zero_grad(set_to_none=True)
    strategy.save_checkpoint(dir, model, optimizer, scheduler)  # every rank calls; rank 0 writes shared files
    strategy.full_state_dict(model)                           # one consolidated CPU state dict on rank 0
    strategy.teardown()
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset, Sampler

from trainer.adapters import is_adapter_model, load_adapter
from trainer.data import move_to_device
from trainer.precision import autocast as precision_autocast

OptimizerFactory = Callable[[torch.nn.Module], torch.optim.Optimizer]
SchedulerFactory = Callable[[torch.optim.Optimizer], Any]


class Strategy(ABC):
    """Where the model lives and how gradients, weights and checkpoints cross processes."""

    name: str = "base"

    def __init__(self, args: Any) -> None:
        self.args = args
        self.device = torch.device("cpu")
        self.rank = 0
        self.local_rank = 0
        self.world_size = 1

    # ---- process and device -------------------------------------------------------------------------------
    @property
    def is_global_zero(self) -> bool:
        return self.rank == 0

    @property
    def is_local_zero(self) -> bool:
        return self.local_rank == 0

    @abstractmethod
    def setup_environment(self) -> None:
        """Pick the device; start the process group when there are several ranks. Idempotent."""

    def teardown(self) -> None:  # noqa: B027 (a no-op default on purpose: one rank has nothing to release)
        """Release the process group and anything else setup_environment made."""

    # ---- model, optimizer, scheduler ---------------------------------------------------------------------
    @abstractmethod
    def setup(
        self,
        model: torch.nn.Module,
        build_optimizer: OptimizerFactory,
        build_scheduler: SchedulerFactory,
    ) -> tuple[torch.nn.Module, torch.optim.Optimizer, Any]:
        """Move/wrap the model, then build optimizer and scheduler on the wrapped parameters."""

    def unwrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """The user's module under any wrapper (DDP's `.module`, DeepSpeed's engine)."""
        return getattr(model, "module", model)

    # ---- one optimizer step ------------------------------------------------------------------------------
    def no_backward_sync(self, model: torch.nn.Module, enabled: bool) -> contextlib.AbstractContextManager:
        """Skip the gradient all-reduce for the micro-batches before the last of an accumulation window."""
        return contextlib.nullcontext()

    @abstractmethod
    def backward(
        self, loss: torch.Tensor, model: torch.nn.Module, optimizer: torch.optim.Optimizer
    ) -> None: ...

    @abstractmethod
    def clip_grad_norm(
        self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, max_norm: float
    ) -> torch.Tensor | None:
        """Clip to max_norm and return the total norm before clipping (None when max_norm <= 0)."""

    @abstractmethod
    def optimizer_step(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> bool:
        """Step the optimizer. Returns False when the step was skipped (fp16 overflow)."""

    # ---- collectives (no-ops on one rank) ----------------------------------------------------------------
    def barrier(self) -> None:  # noqa: B027 (a no-op default on purpose: one rank never waits)
        pass

    def reduce_mean(self, value: torch.Tensor) -> torch.Tensor:
        return value

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        return obj

    def gather_for_eval(self, tensor: torch.Tensor) -> torch.Tensor:
        """Concatenate a tensor from every rank along dim 0 (padding trimmed by the caller)."""
        return tensor

    # ---- data --------------------------------------------------------------------------------------------
    def train_sampler(self, dataset: Dataset, shuffle: bool, seed: int) -> Sampler | None:
        """None means: the loop builds its own (a seeded RandomSampler or SequentialSampler)."""
        return None

    def eval_sampler(self, dataset: Dataset) -> Sampler | None:
        return None

    # ---- weights and checkpoints -------------------------------------------------------------------------
    @abstractmethod
    def full_state_dict(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        """One consolidated state dict on CPU, complete on rank 0 (other ranks may get an empty dict)."""

    @abstractmethod
    def save_checkpoint(
        self, directory: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any
    ) -> None:
        """Write model, optimizer and scheduler state into `directory` (already created, a temporary folder)."""

    @abstractmethod
    def load_checkpoint(
        self, directory: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any
    ) -> None:
        """Restore what save_checkpoint wrote."""

    def iter_named_parameters(self, model: torch.nn.Module) -> Iterator[tuple[str, torch.nn.Parameter]]:
        return self.unwrap(model).named_parameters()

    # ---- added by trainer-core: defaults that a strategy may override ------------------------------------------
    def autocast(self) -> contextlib.AbstractContextManager:
        """The precision context of a forward pass: bf16/fp16 autocast, or nothing in full precision."""
        return precision_autocast(self.args, self.device)

    def move_batch(self, batch: Any) -> Any:
        """Put a batch on this rank's device (a no-op on CPU, where the loader already made it)."""
        if self.device.type == "cpu":
            return batch
        return move_to_device(batch, self.device)

    def load_model_weights(self, directory: Path, model: torch.nn.Module) -> None:
        """Load `directory/model.safetensors` (consolidated weights) into the model, as load_best_model_at_end does;
        for an adapter model, the adapter that checkpoint holds."""
        from safetensors.torch import load_model

        if is_adapter_model(self.unwrap(model)):
            load_adapter(self.unwrap(model), Path(directory), self.device)
            return
        load_model(
            self.unwrap(model),
            str(Path(directory) / "model.safetensors"),
            strict=True,
            device=str(self.device),
        )

    # ---- added by strategies: defaults that a strategy may override ---------------------------------------------
    def grad_norm_after_step(self) -> torch.Tensor | None:
        """The gradient norm measured inside `optimizer_step`, for strategies that clip there (DeepSpeed) and so
        return None from `clip_grad_norm`. None otherwise."""
        return None

    def mean_over_ranks(self, value: float) -> float:
        """A Python number averaged over all ranks (a collective: every rank calls it). One rank: the value itself."""
        if self.world_size == 1:
            return value
        return float(self.reduce_mean(torch.tensor(float(value), dtype=torch.float64, device=self.device)))
