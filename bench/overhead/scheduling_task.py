"""The task of bench/overhead/scheduling.py: an MLP on a generated 10-class problem, a few milliseconds per step on one thread.

Named by the benchmark's study file as `scheduling_task:model_init` (the file is copied next to the study file), and
used directly by the transformers `hyperparameter_search` side, so both train exactly the same thing."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

FEATURES, CLASSES, HIDDEN = 64, 10, 384


class Samples(torch.utils.data.Dataset):
    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[index], "labels": self.y[index]}


class MLP(nn.Module):
    def __init__(self, hidden: int = HIDDEN) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(FEATURES, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, CLASSES),
        )

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        logits = self.net(x)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = nn.functional.cross_entropy(logits, labels)
        return out


def model_init(params: dict[str, Any] | None = None) -> nn.Module:
    return MLP(int((params or {}).get("hidden", HIDDEN)))


def data(params: dict[str, Any] | None = None) -> tuple[Samples, Samples]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(4096 + 512, FEATURES, generator=generator)
    centers = torch.randn(CLASSES, FEATURES, generator=generator) * 0.6
    y = torch.cdist(x, centers).argmin(dim=1)
    return Samples(x[:4096], y[:4096]), Samples(x[4096:], y[4096:])


def compute_metrics(prediction: Any) -> dict[str, float]:
    logits = (
        prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
    )
    return {"accuracy": float((np.asarray(logits).argmax(-1) == np.asarray(prediction.label_ids)).mean())}
