"""Label smoothing (`label_smoothing_factor`), computed as transformers' LabelSmoother does.

loss = (1 - epsilon) x NLL of the true label + epsilon x mean NLL over all classes, over the positions whose label is
not -100. Causal language models are scored on shifted labels (position t predicts token t + 1).
"""

from __future__ import annotations

import torch

from trainer.modeling import call_model
from trainer.outputs import loss_and_logits

IGNORE_INDEX = -100


def is_causal_lm(model: torch.nn.Module) -> bool:
    """Whether the model predicts the next token (transformers names them *ForCausalLM / *LMHeadModel)."""
    name = type(model).__name__
    return name.endswith("ForCausalLM") or name.endswith("LMHeadModel")


def label_smoothed_loss(
    logits: torch.Tensor, labels: torch.Tensor, epsilon: float, shift_labels: bool = False
) -> torch.Tensor:
    if shift_labels:
        logits = logits[..., :-1, :].contiguous()
        labels = labels[..., 1:].contiguous()
    log_probs = -torch.nn.functional.log_softmax(logits.float(), dim=-1)
    if labels.dim() == log_probs.dim() - 1:
        labels = labels.unsqueeze(-1)
    padding = labels.eq(IGNORE_INDEX)
    nll = log_probs.gather(dim=-1, index=torch.clamp(labels, min=0).long()).masked_fill(padding, 0.0)
    smoothed = log_probs.sum(dim=-1, keepdim=True).masked_fill(padding, 0.0)
    active = padding.numel() - padding.long().sum()
    return (1 - epsilon) * nll.sum() / active + epsilon * smoothed.sum() / (active * log_probs.shape[-1])


def smoothed_loss_and_outputs(
    model: torch.nn.Module, unwrapped: torch.nn.Module, inputs: dict, epsilon: float
) -> tuple[torch.Tensor, object]:
    """Run the model without its labels (so it computes no loss of its own) and smooth the labels."""
    features = {key: value for key, value in inputs.items() if key != "labels"}
    outputs = call_model(model, features)
    logits = loss_and_logits(outputs)[1]
    if isinstance(logits, tuple):
        logits = logits[0]
    return label_smoothed_loss(logits, inputs["labels"], epsilon, is_causal_lm(unwrapped)), outputs
