"""The task of the chaos harness's studies (tests/chaos/campaign.py): a tiny MLP on a generated 3-class problem, slowed by a
sleep in each forward so that faults land mid-trial, and three functions that raise on purpose.

The harness copies this file next to each study file it writes (the study's folder makes it importable in every
worker and trial process). A fault "exception in model_init / data / compute_metrics" is a flag file in that folder,
`raise-<where>`: the first trial process to rename it away raises, once (a rename succeeds for one process only).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

FEATURES, CLASSES = 8, 3
HERE = Path(__file__).resolve().parent


class Samples(torch.utils.data.Dataset):
    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[index], "labels": self.y[index]}


class MLP(nn.Module):
    def __init__(self, hidden: int, dropout: float, delay: float) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(FEATURES, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, CLASSES)
        )
        self.delay = delay

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        time.sleep(self.delay)  # slow enough that a signal lands mid-trial, not between trials
        logits = self.net(x)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = nn.functional.cross_entropy(logits, labels)
        return out


def raise_if_flagged(where: str) -> None:
    """Raise once per flag file: the process whose rename succeeds raises, every other process goes on."""
    flag = HERE / f"raise-{where}"
    try:
        os.rename(flag, HERE / f"raised-{where}-{os.getpid()}")
    except FileNotFoundError:
        return
    raise RuntimeError(f"chaos: {where} raised on purpose")


def model_init(params: dict[str, Any]) -> nn.Module:
    raise_if_flagged("model_init")
    return MLP(
        int(params.get("hidden", 16)), float(params.get("dropout", 0.0)), float(params.get("delay", 0.02))
    )


def data(params: dict[str, Any]) -> tuple[Samples, Samples]:
    raise_if_flagged("data")
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(384, FEATURES, generator=generator)
    centers = torch.randn(CLASSES, FEATURES, generator=generator) * 1.5
    y = torch.cdist(x, centers).argmin(dim=1)
    return Samples(x[:256], y[:256]), Samples(x[256:], y[256:])


def compute_metrics(prediction: Any) -> dict[str, float]:
    raise_if_flagged("compute_metrics")
    logits = (
        prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
    )
    return {"accuracy": float((np.asarray(logits).argmax(-1) == np.asarray(prediction.label_ids)).mean())}


def set_dropout(model: nn.Module, value: float) -> None:
    """The study's `mutable: {dropout: ...}` entry (PBT)."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = float(value)
