"""The real pretrained MiniLM-L6 with a real peft LoRA adapter, and a few tokenized reviews: what the adapter tests train.

Small on purpose (short reviews, a few steps) so that each test runs in seconds on one CPU thread.
"""

from __future__ import annotations

from typing import Any

import torch
from peft import LoraConfig, PeftConfig, PromptEncoderConfig, get_peft_model

from studies.tasks import minilm

SMALL_DATA = {"train_size": 32, "eval_size": 16, "max_length": 16}
FULL_MODEL_BYTES = 80_000_000  # MiniLM-L6's model.safetensors with a classification head is about 90 MB


def base_model(seed: int = 0) -> torch.nn.Module:
    """The pretrained encoder with a new classification head (seeded: the head's initial weights are random)."""
    torch.manual_seed(seed)
    return minilm.model_init({"hidden_dropout": 0.0, "attention_dropout": 0.0, "classifier_dropout": 0.0})


def lora_model(seed: int = 0, **options: Any) -> torch.nn.Module:
    """LoRA (r=8 on query and value unless told otherwise) over a fresh base model; the head is trained in full."""
    config = {"r": 8, "lora_alpha": 16, "lora_dropout": 0.1, "target_modules": ["query", "value"]}
    config.update(options)
    model = base_model(seed)
    torch.manual_seed(seed)
    return get_peft_model(model, LoraConfig(task_type="SEQ_CLS", **config))


def p_tuning_model(seed: int = 0) -> torch.nn.Module:
    """P-tuning: its saved adapter is the prompt the encoder computes, not the encoder (checkpoints keep both)."""
    return peft_model(
        PromptEncoderConfig(task_type="SEQ_CLS", num_virtual_tokens=4, encoder_hidden_size=32), seed
    )


def peft_model(config: PeftConfig, seed: int = 0) -> torch.nn.Module:
    model = base_model(seed)
    torch.manual_seed(seed)
    return get_peft_model(model, config)


def data() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return minilm.data(SMALL_DATA)


def collator(features: list[dict[str, Any]]) -> dict[str, Any]:
    return minilm.collator(features)


def trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}
