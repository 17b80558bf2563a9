"""Seeding: one call makes python, numpy and torch (CPU and CUDA) draw the same numbers again."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

# Set by enable_full_determinism when CUDA is there, and left set on purpose: cuBLAS reads its workspace setting when it
# creates a handle, so it must stay in force for as long as the process uses CUDA.
CUDA_DETERMINISM_ENVIRONMENT = {"CUDA_LAUNCH_BLOCKING": "1", "CUBLAS_WORKSPACE_CONFIG": ":16:8"}


def set_seed(seed: int, deterministic: bool = False) -> None:
    """Seed every random number generator the training loop touches.

    `deterministic=True` also asks torch for deterministic kernels (see `enable_full_determinism`).
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # seeds the CUDA generators too
    if deterministic:
        enable_full_determinism(seed)


def enable_full_determinism(seed: int) -> None:
    """Seed everything and force deterministic algorithms (slower; an op without one raises).

    The CUDA environment variables only matter when CUDA is used, so they are set only then.
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        for name, value in CUDA_DETERMINISM_ENVIRONMENT.items():
            os.environ.setdefault(name, value)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=False)


def rng_state() -> dict:
    """Every generator's state, as plain values and tensors (loadable with `torch.load(weights_only=True)`)."""
    key, numbers, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": {
            "key": key,
            "state": torch.from_numpy(numbers.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "cpu": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restore what `rng_state` returned."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    numpy_state = state["numpy"]
    np.random.set_state(
        (
            numpy_state["key"],
            numpy_state["state"].numpy().astype(np.uint32),
            numpy_state["pos"],
            numpy_state["has_gauss"],
            numpy_state["cached_gaussian"],
        )
    )
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
