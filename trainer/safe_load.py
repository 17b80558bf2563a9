"""Reading checkpoint files that may come from anywhere (a shared disk, a download, another user's study).

A pickle runs code when it is loaded: a `__reduce__` in `optimizer.pt` or `pytorch_model.bin` is a program. So:
- weights are read from safetensors files only; a `pytorch_model.bin` is never loaded, and a checkpoint that has one
  instead of `model.safetensors` is refused with a message that names the file;
- the trainer's own pickles (optimizer.pt, scheduler.pt, scaler.pt, rng_state*.pth) are loaded with
  `torch.load(weights_only=True)`, which builds tensors and plain values only;
- before a resume, every pickle in the folder is inspected without being run (the globals it would import), so
  DeepSpeed, which loads its own files with `weights_only=False`, never sees a file that calls anything but the few
  classes DeepSpeed itself saves.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import torch
from torch.serialization import get_unsafe_globals_in_checkpoint

from trainer.errors import CheckpointError

PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".pickle", ".ckpt")
# What DeepSpeed's checkpoint files need beyond torch's weights-only set: its loss scaler, its ZeRO stage enum and the
# fragment addresses of its parameter mappings (classes, built without calling anything else).
DEEPSPEED_GLOBALS = frozenset(
    {
        "deepspeed.runtime.fp16.loss_scaler.LossScaler",
        "deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler",
        "deepspeed.runtime.zero.config.ZeroStageEnum",
        "deepspeed.utils.tensor_fragment.fragment_address",
    }
)
FIX = "resume from a checkpoint this trainer wrote, or delete it"


def load_torch_file(path: str | Path, map_location: Any = "cpu") -> Any:
    """`torch.load(weights_only=True)`, with a refusal that names the file instead of torch's page of advice."""
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        reason = str(error).strip().splitlines()[-1][:160] if str(error).strip() else "not plain tensors"
        raise CheckpointError(
            f"{path}: refused: it holds pickled objects other than tensors and plain values, which could run code "
            f"when loaded, so it was not loaded ({reason}); {FIX}"
        ) from None


def check_pickles(folder: str | Path) -> None:
    """Refuse `folder` if any pickle file in it (at any depth) would import anything beyond tensors, plain values and
    DeepSpeed's own classes. Reads each file's pickle opcodes; runs none of them."""
    for path in sorted(Path(folder).rglob("*")):
        if path.suffix in PICKLE_SUFFIXES and path.is_file():
            _check_pickle(path)


def _check_pickle(path: Path) -> None:
    try:
        needed = get_unsafe_globals_in_checkpoint(str(path))
    except Exception:  # not a zip file torch.save wrote: a bare pickle, which nothing in a checkpoint is
        raise CheckpointError(
            f"{path}: refused: not a file torch.save wrote (a bare pickle?); {FIX}"
        ) from None
    unsafe = [name for name in needed if name not in DEEPSPEED_GLOBALS]
    if unsafe:
        raise CheckpointError(
            f"{path}: refused: loading it would call {', '.join(unsafe[:3])} (a pickle that can run code), so it "
            f"is not loaded; {FIX}"
        )


def require_weights_file(path: str | Path) -> Path:
    """`path` (a safetensors file) if it exists; else a refusal that says a pickle beside it is never a substitute."""
    path = Path(path)
    if path.is_file():
        return path
    pickles = sorted(
        p.name for p in path.parent.glob("*") if p.suffix in PICKLE_SUFFIXES and "model" in p.name
    )
    instead = (
        f"; {', '.join(pickles)} is a pickle, and weights are read from safetensors only (convert it with "
        "safetensors.torch.save_file)"
        if pickles
        else ""
    )
    raise CheckpointError(f"{path.parent}: no {path.name}{instead}; {FIX}")
