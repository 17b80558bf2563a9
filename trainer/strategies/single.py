"""One process, one device: a CUDA GPU when there is one (and `use_cpu` is off), else the CPU."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_model, save_model

from trainer.adapters import is_adapter_model, load_adapter, save_adapter
from trainer.data import move_to_device
from trainer.precision import autocast_dtype, check_precision, create_grad_scaler
from trainer.safe_load import load_torch_file, require_weights_file
from trainer.strategies.base import OptimizerFactory, SchedulerFactory, Strategy

MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.pt"
SCHEDULER_FILE = "scheduler.pt"
SCALER_FILE = "scaler.pt"
_FULL_PRECISION = contextlib.nullcontext()


class SingleDeviceStrategy(Strategy):
    name = "single"

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.scaler: torch.amp.GradScaler | None = None

    def setup_environment(self) -> None:
        use_cuda = torch.cuda.is_available() and not getattr(self.args, "use_cpu", False)
        self.device = torch.device("cuda", torch.cuda.current_device()) if use_cuda else torch.device("cpu")
        check_precision(self.args, self.device)
        self.scaler = create_grad_scaler(self.args, self.device)
        self._on_cpu = self.device.type == "cpu"
        self._full_precision = autocast_dtype(self.args) is None

    def autocast(self) -> contextlib.AbstractContextManager:
        return _FULL_PRECISION if self._full_precision else super().autocast()  # runs every micro-batch

    def move_batch(self, batch: Any) -> Any:
        return (
            batch if self._on_cpu else move_to_device(batch, self.device)
        )  # runs every micro-batch: keep it cheap

    def setup(
        self, model: torch.nn.Module, build_optimizer: OptimizerFactory, build_scheduler: SchedulerFactory
    ) -> tuple[torch.nn.Module, torch.optim.Optimizer, Any]:
        model = model.to(self.device)
        optimizer = build_optimizer(model)
        return model, optimizer, build_scheduler(optimizer)

    # ---- one optimizer step ------------------------------------------------------------------------------
    def backward(self, loss: torch.Tensor, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
        else:
            loss.backward()

    def clip_grad_norm(
        self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, max_norm: float
    ) -> torch.Tensor | None:
        if max_norm <= 0:
            return None
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
        return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)

    def optimizer_step(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> bool:
        if self.scaler is None:
            optimizer.step()
            return True
        scale_before = self.scaler.get_scale()
        self.scaler.step(optimizer)
        self.scaler.update()
        return (
            self.scaler.get_scale() >= scale_before
        )  # the scale drops only when the step was skipped (overflow)

    # ---- weights and checkpoints -------------------------------------------------------------------------
    def full_state_dict(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu() for k, v in self.unwrap(model).state_dict().items()}

    def save_checkpoint(
        self, directory: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any
    ) -> None:
        module = self.unwrap(model)
        if is_adapter_model(module):
            save_adapter(module, directory, is_main=True)  # the adapter only, in peft's layout
        else:
            save_model(module, str(directory / MODEL_FILE))  # handles tied weights
        if getattr(self.args, "save_only_model", False):
            return
        torch.save(optimizer.state_dict(), directory / OPTIMIZER_FILE)
        if scheduler is not None:
            torch.save(scheduler.state_dict(), directory / SCHEDULER_FILE)
        if self.scaler is not None:
            torch.save(self.scaler.state_dict(), directory / SCALER_FILE)

    def load_checkpoint(
        self, directory: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any
    ) -> None:
        module = self.unwrap(model)
        if is_adapter_model(module):
            load_adapter(module, directory, self.device)
        else:
            weights = require_weights_file(
                directory / MODEL_FILE
            )  # never a pytorch_model.bin (a pickle) instead
            load_model(module, str(weights), strict=True, device=str(self.device))
        optimizer.load_state_dict(_load(directory / OPTIMIZER_FILE, self.device))
        if scheduler is not None and (directory / SCHEDULER_FILE).exists():
            scheduler.load_state_dict(_load(directory / SCHEDULER_FILE, "cpu"))
        if self.scaler is not None and (directory / SCALER_FILE).exists():
            self.scaler.load_state_dict(_load(directory / SCALER_FILE, "cpu"))


def _load(path: Path, device: Any) -> Any:
    return load_torch_file(path, map_location=device)
