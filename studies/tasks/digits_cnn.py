"""Task: scikit-learn's bundled 8x8 digits with a small CNN (two convolutions, then a linear head): the second problem
of `bench/search/` (a model a user would recognise, on data that ships in a package), trained the way the MLP is.

Named by study files as `studies.tasks.digits_cnn:model_init`; data and metrics are the MLP task's
(`studies.tasks.digits:data`, `:compute_metrics`). Model parameters: channels, dropout.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class DigitsCNN(nn.Module):
    """conv(1 -> c) > relu > conv(c -> 2c) > relu > 2x2 pool > dropout > linear; returns {"loss", "logits"}."""

    def __init__(self, channels: int = 16, dropout: float = 0.1) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(channels, 2 * channels, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Dropout(dropout),
        )
        self.head = nn.Linear(2 * channels * 16, 10)

    def forward(self, pixels: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        logits = self.head(self.features(pixels.view(-1, 1, 8, 8)).flatten(1))
        output = {"logits": logits}
        if labels is not None:
            output["loss"] = nn.functional.cross_entropy(logits, labels)
        return output


def model_init(params: dict[str, Any] | None = None) -> DigitsCNN:
    known = {"channels", "dropout"}
    unknown = sorted(set(params or {}) - known)
    if unknown:
        raise ValueError(f"digits CNN: unknown parameter(s) {unknown}; it takes {sorted(known)}")
    return DigitsCNN(**(params or {}))
