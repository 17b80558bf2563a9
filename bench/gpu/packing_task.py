"""The tasks of bench/gpu/packing.py (the file is copied next to each generated study file).

- `bert_init` / `token_data`: a small BERT classifier (4 layers, hidden 256) on generated token sequences: a trial
  that leaves an H100 mostly idle, so several of them share one well.
- `hungry_init` / `feature_data`: a model whose activations take `activation_gib` GiB of GPU memory per step (a wide
  elementwise layer whose input and output stay alive through backward): trials that do not all fit on one GPU.
- `profile_init` (bench/gpu/oom.py): the same model sized by the trial's `profile`: `steady` (`steady_gib` throughout),
  `grower` (`grower_start_gib`, then `grower_gib` from training step `grow_at` on: small when the GPU gate measures it,
  too big for the GPU beside others later) or `hog` (`hog_gib`: more than the GPU has).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

VOCAB, SEQUENCE, CLASSES, FEATURES = 1000, 128, 2, 1024


class Samples(torch.utils.data.Dataset):
    def __init__(self, columns: dict[str, torch.Tensor]) -> None:
        self.columns = columns

    def __len__(self) -> int:
        return len(self.columns["labels"])

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {name: column[index] for name, column in self.columns.items()}


def bert_init(params: dict[str, Any] | None = None) -> nn.Module:
    from transformers import BertConfig, BertForSequenceClassification

    params = params or {}
    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=int(params.get("hidden_size", 256)),
        num_hidden_layers=int(params.get("num_layers", 4)),
        num_attention_heads=4,
        intermediate_size=4 * int(params.get("hidden_size", 256)),
        max_position_embeddings=SEQUENCE,
        num_labels=CLASSES,
    )
    return BertForSequenceClassification(config)


def token_data(params: dict[str, Any] | None = None) -> tuple[Samples, Samples]:
    """Label 1 when token 7 occurs in the first half of the sequence: learnable, so the metric moves."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(8, VOCAB, (4096 + 512, SEQUENCE), generator=generator)
    labels = torch.randint(0, CLASSES, (len(ids),), generator=generator)
    ids[labels == 1, SEQUENCE // 4] = 7
    mask = torch.ones_like(ids)
    split = 4096
    train = {"input_ids": ids[:split], "attention_mask": mask[:split], "labels": labels[:split]}
    evaluation = {"input_ids": ids[split:], "attention_mask": mask[split:], "labels": labels[split:]}
    return Samples(train), Samples(evaluation)


class Hungry(nn.Module):
    """x (B, F) -> relu(x[:, None, :] * w) (B, K, F) -> mean over K -> linear head. The (B, K, F) product and its
    relu are alive together in the forward, and relu's output and its gradient in the backward, with the allocator's
    rounding: about four times B*K*F*4 bytes at the peak (an H200, 2026-11-28: K sized for three times gave a
    56.6 GiB peak for 42.1 GiB asked), so K is chosen for `activation_gib` at the batch size. With `grow_by` > 1 the weight
    is repeated that many times from the `grow_at`-th training forward on: the activations grow by that factor."""

    def __init__(self, width: int, grow_by: int = 1, grow_at: int = 0) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.randn(width, FEATURES) * 0.05)
        self.head = nn.Linear(FEATURES, CLASSES)
        self.grow_by, self.grow_at, self.forwards = grow_by, grow_at, 0

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        self.forwards += int(self.training)
        grown = self.grow_by > 1 and self.forwards > self.grow_at
        wide = torch.relu(x[:, None, :] * (self.scale.repeat(self.grow_by, 1) if grown else self.scale))
        logits = self.head(wide.mean(dim=1))
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = nn.functional.cross_entropy(logits, labels)
        return out


def _width(gib: float, batch: int) -> int:
    return max(1, int(gib * 2**30 / (4 * batch * FEATURES * 4)))


def hungry_init(params: dict[str, Any] | None = None) -> nn.Module:
    params = params or {}
    return Hungry(_width(float(params.get("activation_gib", 28.0)), int(params.get("batch_size", 32))))


def profile_init(params: dict[str, Any]) -> nn.Module:
    batch, profile = int(params.get("batch_size", 32)), params["profile"]
    if profile == "grower":
        start, grown = float(params["grower_start_gib"]), float(params["grower_gib"])
        return Hungry(
            _width(start, batch), grow_by=max(2, round(grown / start)), grow_at=int(params["grow_at"])
        )
    return Hungry(_width(float(params[f"{profile}_gib"]), batch))


def feature_data(params: dict[str, Any] | None = None) -> tuple[Samples, Samples]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2048 + 256, FEATURES, generator=generator)
    labels = (x[:, 0] > 0).long()
    train = Samples({"x": x[:2048], "labels": labels[:2048]})
    return train, Samples({"x": x[2048:], "labels": labels[2048:]})


def accuracy(prediction: Any) -> dict[str, float]:
    logits = (
        prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
    )
    return {"accuracy": float((logits.argmax(-1) == prediction.label_ids).mean())}
