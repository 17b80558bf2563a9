"""Mixed precision: bf16 autocast on CPU and CUDA; fp16 autocast with a GradScaler on CUDA only."""

from __future__ import annotations

import contextlib

import torch

from trainer.args import TrainingArguments
from trainer.errors import TrainerConfigError

_NO_AUTOCAST = contextlib.nullcontext()


def check_precision(args: TrainingArguments, device: torch.device) -> None:
    """Refuse a precision the device cannot run, before any step is taken."""
    if args.fp16 and device.type != "cuda":
        raise TrainerConfigError(
            f"fp16 needs a CUDA GPU (this run uses {device.type}); set 'bf16: true' for mixed precision on CPU, "
            "or turn 'fp16' off"
        )
    if args.bf16 and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise TrainerConfigError("this GPU does not support bf16; set 'fp16: true' instead of 'bf16'")


def autocast_dtype(args: TrainingArguments) -> torch.dtype | None:
    if args.bf16:
        return torch.bfloat16
    if args.fp16:
        return torch.float16
    return None


def autocast(args: TrainingArguments, device: torch.device) -> contextlib.AbstractContextManager:
    """A context for the forward pass: autocast in the chosen dtype, or nothing in full precision."""
    dtype = autocast_dtype(args)
    if dtype is None:
        return _NO_AUTOCAST
    return torch.autocast(device_type=device.type, dtype=dtype)


def create_grad_scaler(args: TrainingArguments, device: torch.device) -> torch.amp.GradScaler | None:
    """fp16 gradients underflow without loss scaling; bf16 has fp32's range and needs none."""
    if args.fp16 and device.type == "cuda":
        return torch.amp.GradScaler("cuda")
    return None
