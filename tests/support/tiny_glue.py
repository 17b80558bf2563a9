"""A tiny BERT and a token task it learns in a few steps, for the transformers-style tests and example scripts (no
Hub download: the model is built from a config, the data generated)."""

from __future__ import annotations

import torch
from transformers import BertConfig


class Parity(torch.utils.data.Dataset):
    """Label 1 when token 5 appears: a task a one-layer BERT learns in a few steps."""

    def __init__(self, n: int = 48, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(6, 30, (n, 8), generator=generator)
        self.labels = torch.arange(n) % 2
        self.ids[self.labels == 1, 3] = 5

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {
            "input_ids": self.ids[i],
            "attention_mask": torch.ones(8, dtype=torch.long),
            "labels": self.labels[i],
        }


def tiny_bert_config() -> BertConfig:
    """One layer, hidden size 16, a 32-token vocabulary, two labels."""
    return BertConfig(
        vocab_size=32,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
    )
