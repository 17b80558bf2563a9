"""Task: classify scikit-learn's bundled 8x8 digits (1,797 images, 10 classes) with a small MLP.

Named by run and study files as `studies.tasks.digits:model_init`, `:data` and `:compute_metrics`. Model parameters
(`model:` in a run file, or sampled in a study): hidden_size, num_layers, dropout, activation.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

EVAL_FRACTION = 0.2
SPLIT_SEED = 0  # a fixed split: every trial of a study is scored on the same eval images
ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "silu": nn.SiLU}


@dataclass(frozen=True)
class MLPConfig:
    hidden_size: int = 128
    num_layers: int = 1
    dropout: float = 0.1
    activation: str = "relu"

    @classmethod
    def from_params(cls, params: dict[str, Any] | None) -> MLPConfig:
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(params or {}) - set(names))
        if unknown:
            raise ValueError(f"digits model: unknown parameter(s) {unknown}; it takes {names}")
        config = cls(**(params or {}))
        if config.activation not in ACTIVATIONS:
            raise ValueError(
                f"digits model: activation {config.activation!r} is not one of {sorted(ACTIVATIONS)}"
            )
        return config


class DigitsMLP(nn.Module):
    """An MLP that returns {"loss", "logits"} like a transformers model, so the Trainer needs no loss function."""

    def __init__(self, config: MLPConfig) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = 64
        for _ in range(config.num_layers):
            layers += [
                nn.Linear(width, config.hidden_size),
                ACTIVATIONS[config.activation](),
                nn.Dropout(config.dropout),
            ]
            width = config.hidden_size
        layers.append(nn.Linear(width, 10))
        self.net = nn.Sequential(*layers)

    def forward(self, pixels: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        logits = self.net(pixels)
        output = {"logits": logits}
        if labels is not None:
            output["loss"] = nn.functional.cross_entropy(logits, labels)
        return output


class DigitsDataset(Dataset):
    def __init__(self, pixels: np.ndarray, labels: np.ndarray) -> None:
        self.pixels = torch.tensor(pixels, dtype=torch.float32)
        self.labels = torch.tensor(labels, dtype=torch.long)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"pixels": self.pixels[index], "labels": self.labels[index]}


def model_init(params: dict[str, Any] | None = None) -> DigitsMLP:
    return DigitsMLP(MLPConfig.from_params(params))


def set_dropout(model: nn.Module, value: float) -> None:
    """`task.mutable: {dropout: studies.tasks.digits:set_dropout}`: population-based training changes the dropout of a
    model that is training (every dropout layer of the MLP)."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = float(value)


def data() -> tuple[DigitsDataset, DigitsDataset]:
    """(train, eval): a stratified 80/20 split, pixels scaled from 0..16 to 0..1. No parameters: every trial trains on
    the same data, so hpo loads it once per worker process and its trials share it."""
    pixels, labels = load_digits_arrays()
    eval_index = stratified_eval_index(labels, EVAL_FRACTION, SPLIT_SEED)
    train_mask = np.ones(len(labels), dtype=bool)
    train_mask[eval_index] = False
    return DigitsDataset(pixels[train_mask], labels[train_mask]), DigitsDataset(
        pixels[eval_index], labels[eval_index]
    )


def load_digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled digits.csv.gz, read directly: importing sklearn (and scipy) costs about a second, which
    every trial process would pay; fall back to sklearn.datasets.load_digits if the file moves."""
    spec = importlib.util.find_spec("sklearn")
    path = Path(spec.origin).parent / "datasets" / "data" / "digits.csv.gz" if spec and spec.origin else None
    if path is not None and path.is_file():
        table = np.loadtxt(path, delimiter=",", dtype=np.float32)
        pixels, labels = table[:, :-1], table[:, -1].astype(np.int64)
    else:
        from sklearn.datasets import load_digits

        digits = load_digits()
        pixels, labels = digits.data.astype(np.float32), digits.target.astype(np.int64)
    return pixels / 16.0, labels


def stratified_eval_index(labels: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Indexes of a fixed eval split holding `fraction` of each class."""
    rng = np.random.default_rng(seed)
    chosen = []
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        chosen.append(members[: round(len(members) * fraction)])
    return np.sort(np.concatenate(chosen))


def compute_metrics(prediction: Any) -> dict[str, float]:
    """Accuracy of the argmax class; `prediction` is an EvalPrediction (predictions = logits, label_ids)."""
    logits = (
        prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
    )
    return {"accuracy": float((np.asarray(logits).argmax(-1) == np.asarray(prediction.label_ids)).mean())}
