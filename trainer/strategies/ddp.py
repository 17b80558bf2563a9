"""Distributed data parallel: every rank holds the whole model; gradients are averaged by torch DDP (gloo on CPU,
nccl on CUDA). Checkpoints are ordinary full state dicts written by rank 0, so a DDP run resumes exactly."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

from trainer.adapters import is_adapter_model, load_adapter, save_adapter
from trainer.precision import create_grad_scaler
from trainer.strategies.base import OptimizerFactory, SchedulerFactory
from trainer.strategies.parallel import (
    MODEL_FILE,
    OPTIMIZER_FILE,
    ParallelStrategy,
    load_scheduler,
    load_torch_file,
    load_weights,
    save_scheduler,
)


class DDPStrategy(ParallelStrategy):
    name = "ddp"

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.scaler: torch.amp.GradScaler | None = None

    def setup(
        self, model: torch.nn.Module, build_optimizer: OptimizerFactory, build_scheduler: SchedulerFactory
    ) -> tuple[torch.nn.Module, torch.optim.Optimizer, Any]:
        model = model.to(self.device)
        wrapped = DistributedDataParallel(
            model,
            device_ids=[self.device.index] if self.device.type == "cuda" else None,
            find_unused_parameters=bool(getattr(self.args, "ddp_find_unused_parameters", False) or False),
            bucket_cap_mb=getattr(self.args, "ddp_bucket_cap_mb", None),
            # transformers' ddp_broadcast_buffers / ddp_static_graph; None keeps DDP's own defaults
            **ddp_extra_options(self.args),
        )
        # The optimizer sees the user's module so parameter names (weight-decay groups) carry no "module." prefix.
        optimizer = build_optimizer(model)
        scheduler = build_scheduler(optimizer)
        self.scaler = create_grad_scaler(self.args, self.device)
        return wrapped, optimizer, scheduler

    def no_backward_sync(self, model: torch.nn.Module, enabled: bool) -> contextlib.AbstractContextManager:
        if enabled and isinstance(model, DistributedDataParallel):
            return model.no_sync()
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        (self.scaler.scale(loss) if self.scaler else loss).backward()

    def clip_grad_norm(
        self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, max_norm: float
    ) -> torch.Tensor | None:
        if not max_norm or max_norm <= 0:
            return None
        if self.scaler:
            self.scaler.unscale_(optimizer)
        # Gradients are already averaged over ranks, so each rank computes the same global norm.
        return torch.nn.utils.clip_grad_norm_(self.unwrap(model).parameters(), max_norm)

    def optimizer_step(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> bool:
        if self.scaler is None:
            optimizer.step()
            return True
        scale_before = self.scaler.get_scale()
        self.scaler.step(optimizer)
        self.scaler.update()
        return self.scaler.get_scale() >= scale_before

    def full_state_dict(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        return {k: v.detach().to("cpu") for k, v in self.unwrap(model).state_dict().items()}

    def save_checkpoint(
        self, directory: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any
    ) -> None:
        directory = Path(directory)
        module = self.unwrap(model)
        if is_adapter_model(module):  # every rank holds the same adapter: rank 0 writes it, in peft's layout
            save_adapter(module, directory, is_main=self.is_global_zero)
        else:
            self.write_model_file(directory, self.full_state_dict(model))
        if not self.save_only_model:
            self.write_torch_file(directory / OPTIMIZER_FILE, optimizer.state_dict())
            save_scheduler(directory, scheduler, self)
            if self.scaler is not None:
                self.write_torch_file(directory / "scaler.pt", self.scaler.state_dict())
        self.barrier()  # the files are complete before any rank goes on (and before rank 0 renames the folder)

    def load_checkpoint(
        self, directory: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any
    ) -> None:
        directory = Path(directory)
        module = self.unwrap(model)
        if is_adapter_model(module):
            load_adapter(module, directory, self.device)
        else:
            module.load_state_dict(load_weights(directory / MODEL_FILE))
        optimizer.load_state_dict(load_torch_file(directory / OPTIMIZER_FILE))
        load_scheduler(directory, scheduler)
        if self.scaler is not None and (directory / "scaler.pt").exists():
            self.scaler.load_state_dict(load_torch_file(directory / "scaler.pt"))


def ddp_extra_options(args: Any) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if getattr(args, "ddp_broadcast_buffers", None) is not None:
        options["broadcast_buffers"] = args.ddp_broadcast_buffers
    if getattr(args, "ddp_static_graph", None) is not None:
        options["static_graph"] = args.ddp_static_graph
    return options
