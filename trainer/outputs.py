"""What train/evaluate/predict return, and how a model's output is read (loss, logits)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import torch


class TrainOutput(NamedTuple):
    global_step: int
    training_loss: float
    metrics: dict[str, float]


class PredictionOutput(NamedTuple):
    predictions: np.ndarray | tuple[np.ndarray, ...] | None
    label_ids: np.ndarray | tuple[np.ndarray, ...] | None
    metrics: dict[str, float] | None


class EvalLoopOutput(NamedTuple):
    """What `evaluation_loop` returns (transformers' trainer_utils.EvalLoopOutput)."""

    predictions: np.ndarray | tuple[np.ndarray, ...] | None
    label_ids: np.ndarray | tuple[np.ndarray, ...] | None
    metrics: dict[str, float] | None
    num_samples: int | None


class EvalPrediction:
    """What compute_metrics receives: numpy predictions and labels, and the inputs and losses when
    `include_for_metrics` asks for them. Unpacks as transformers' does: `predictions, labels = p`, with inputs and
    losses appended when present."""

    def __init__(self, predictions: Any, label_ids: Any, inputs: Any = None, losses: Any = None) -> None:
        self.predictions = predictions
        self.label_ids = label_ids
        self.inputs = inputs
        self.losses = losses
        self.elements = (predictions, label_ids) + tuple(x for x in (inputs, losses) if x is not None)

    def __iter__(self):
        return iter(self.elements)

    def __getitem__(self, index: int) -> Any:
        return self.elements[index]

    def __len__(self) -> int:
        return len(self.elements)


def _one_or_tuple(values: list[Any]) -> Any:
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def loss_of(output: Any) -> torch.Tensor | None:
    """Only the loss of a model's output (the training path: no logits are collected)."""
    if type(output) is torch.Tensor:
        return output if output.ndim == 0 else None
    if type(output) is dict or isinstance(output, Mapping):
        return output.get("loss")
    return loss_and_logits(output)[0]


def loss_and_logits(output: Any) -> tuple[torch.Tensor | None, Any]:
    """Read a model's output: a scalar tensor is a loss, another tensor logits; a dict or object gives `loss` and
    `logits` (or its other values); a tuple starting with a scalar is (loss, *logits)."""
    if torch.is_tensor(output):
        return (output, None) if output.ndim == 0 else (None, output)
    if type(output) is dict or isinstance(output, Mapping):  # the plain-dict check skips a slower ABC check
        loss = output.get("loss")
        if "logits" in output:
            return loss, output["logits"]
        return loss, _one_or_tuple([v for k, v in output.items() if k != "loss"])
    if isinstance(output, (tuple, list)):
        if output and torch.is_tensor(output[0]) and output[0].ndim == 0:
            return output[0], _one_or_tuple(list(output[1:]))
        return None, _one_or_tuple(list(output))
    if hasattr(output, "loss") or hasattr(output, "logits"):
        return getattr(output, "loss", None), getattr(output, "logits", None)
    raise TypeError(f"cannot read a loss or logits from a model output of type {type(output).__name__}")


def without_keys(output: Any, ignore_keys: list[str] | None) -> Any:
    """A dict-like model output without the entries `ignore_keys` names (transformers' evaluate/predict argument,
    e.g. "past_key_values"); anything else unchanged."""
    if not ignore_keys or not isinstance(output, Mapping):
        return output
    return {key: value for key, value in output.items() if key not in ignore_keys}
