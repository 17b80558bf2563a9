"""`eval_accumulation_steps`: how often evaluation moves its gathered outputs from the device to the CPU.

transformers keeps every batch's predictions on the device and moves them every `eval_accumulation_steps` batches
(all at the end when it is unset, which can exhaust a GPU's memory on a large eval set). Here N batches stay on the
device and move in one copy per tensor every N batches; unset, every batch moves at once (N = 1), the tighter memory
bound, a deliberate difference (docs/compat.md). On a GPU a larger N trades device memory for fewer copies, each a
point where the CPU waits for the GPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

PAD_INDEX = -100  # what labels and predictions of unequal lengths are padded with (transformers' convention)


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    if tensor.dtype in (torch.bfloat16, torch.float16):
        tensor = tensor.float()  # numpy has no bfloat16
    return tensor.numpy()


def concat_on_device(chunks: list[torch.Tensor]) -> torch.Tensor:
    """One tensor of the batches along dim 0, padded with -100 where their other dims differ (sequences)."""
    if chunks[0].dim() == 0:
        return torch.stack(chunks)
    if all(c.shape[1:] == chunks[0].shape[1:] for c in chunks):
        return torch.cat(chunks)
    trailing = [max(c.shape[d] for c in chunks) for d in range(1, chunks[0].dim())]
    out = chunks[0].new_full((sum(c.shape[0] for c in chunks), *trailing), PAD_INDEX)
    row = 0
    for c in chunks:
        out[(slice(row, row + c.shape[0]), *(slice(0, s) for s in c.shape[1:]))] = c
        row += c.shape[0]
    return out


class DeviceAccumulator:
    """One evaluation output (losses, predictions, labels or inputs): per-batch tensors, or tuples of them, kept on
    the device and moved to the CPU as numpy every `every` batches (`copies` counts the moves)."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.pending: list[Any] = []
        self.moved: list[Any] = []
        self.copies = 0

    def add(self, value: Any) -> None:
        self.pending.append(value)
        if len(self.pending) >= self.every:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.moved.append(self._move(self.pending))
            self.pending = []

    def _move(self, batches: list[Any]) -> Any:
        if batches[0] is None:  # an output a model leaves empty in a tuple
            return None
        if isinstance(batches[0], tuple):
            return tuple(self._move([b[i] for b in batches]) for i in range(len(batches[0])))
        self.copies += 1
        return to_numpy(concat_on_device(batches).cpu())

    def chunks(self) -> list[Any]:
        """Everything added, as numpy chunks of up to `every` batches each."""
        self.flush()
        return self.moved
