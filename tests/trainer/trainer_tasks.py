"""Tiny models and data sets for the trainer tests (importable by the subprocesses some tests start)."""

from __future__ import annotations

import torch
from torch.utils.data import Dataset, TensorDataset

from trainer import TrainingArguments


class Regression(Dataset):
    """y = x @ w + noise, as dict samples {"x", "labels"}."""

    def __init__(self, n: int = 64, features: int = 6, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, features, generator=generator)
        weight = torch.randn(features, 1, generator=generator)
        self.y = (self.x @ weight).squeeze(-1) + 0.1 * torch.randn(n, generator=generator)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[index], "labels": self.y[index]}


def tuple_regression(n: int = 64, features: int = 6, seed: int = 0) -> TensorDataset:
    data = Regression(n, features, seed)
    return TensorDataset(data.x, data.y)


class DropoutMLP(torch.nn.Module):
    """An MLP with dropout that returns {"loss", "logits"} (or only logits without labels)."""

    def __init__(self, features: int = 6, hidden: int = 16, dropout: float = 0.2) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(features, hidden),
            torch.nn.ReLU(),
            torch.nn.Dropout(dropout),
            torch.nn.Linear(hidden, 1),
        )

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        logits = self.net(x).squeeze(-1)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = torch.nn.functional.mse_loss(logits, labels)
        return out


class TupleMLP(torch.nn.Module):
    """Takes (x, y) positionally and returns the scalar loss."""

    def __init__(self, features: int = 6) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(features, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.mse_loss(self.net(x).squeeze(-1), y)


def make_model(seed: int = 0) -> DropoutMLP:
    torch.manual_seed(seed)
    return DropoutMLP()


def quiet_args(output_dir, **fields) -> TrainingArguments:
    """Arguments for a short, silent run: no progress bar, no printed logs unless asked."""
    defaults = dict(
        per_device_train_batch_size=8,
        learning_rate=1e-2,
        logging_steps=1000,
        save_strategy="no",
        disable_tqdm=True,
        report_to="none",
    )
    defaults.update(fields)
    return TrainingArguments(output_dir=str(output_dir), **defaults)
