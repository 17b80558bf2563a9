"""NEFTune (`neftune_noise_alpha`): uniform noise on the input embeddings while training, as transformers adds it.

The noise of a batch is uniform in [-m, m] with m = alpha / sqrt(sequence length x embedding width) (Jain et al.,
2023). It is added by a forward hook on the model's input embeddings, only in training mode, and removed when
training ends.
"""

from __future__ import annotations

from typing import Any

import torch

from trainer.errors import TrainerConfigError


def _noise_hook(alpha: float) -> Any:
    def hook(module: torch.nn.Module, inputs: Any, output: torch.Tensor) -> torch.Tensor:
        if not module.training:
            return output
        scale = alpha / torch.sqrt(torch.tensor(output.size(1) * output.size(2), dtype=torch.float32))
        return output + torch.zeros_like(output).uniform_(-scale.item(), scale.item())

    return hook


def activate_neftune(model: torch.nn.Module, alpha: float) -> torch.utils.hooks.RemovableHandle:
    if not hasattr(model, "get_input_embeddings"):
        raise TrainerConfigError(
            f"neftune_noise_alpha needs a model with get_input_embeddings() (a transformers model); "
            f"{type(model).__name__} has none: remove neftune_noise_alpha"
        )
    return model.get_input_embeddings().register_forward_hook(_noise_hook(alpha))
