"""A tiny DistilBERT built from a config (random weights, nothing downloaded) over the MiniLM task's reviews: an
encoder whose forward takes no `past_key_values`, so peft's prefix tuning cannot train it (its tokenizer's ids fit:
DistilBERT's default vocabulary is BERT's)."""

from __future__ import annotations

from typing import Any

import torch
from transformers import DistilBertConfig, DistilBertForSequenceClassification

from studies.tasks.minilm import collator, compute_metrics, data

__all__ = ["collator", "compute_metrics", "data", "model_init"]


def model_init(params: dict[str, Any] | None = None) -> torch.nn.Module:
    torch.manual_seed(0)
    config = DistilBertConfig(dim=32, hidden_dim=64, n_layers=1, n_heads=2, num_labels=2)
    return DistilBertForSequenceClassification(config)
