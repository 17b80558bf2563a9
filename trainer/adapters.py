"""Adapter (PEFT) models in the Trainer: detection, adapter-only checkpoints, and the strategies that support them.

A `peft.PeftModel` trains only its adapter (LoRA matrices, IA³ vectors, prompt embeddings, plus `modules_to_save` such
as a new classification head). Its checkpoints hold just that, written by peft's own `save_pretrained`
(adapter_config.json + adapter_model.safetensors) and read back with peft's `load_peft_weights` and
`set_peft_model_state_dict`, so every checkpoint folder is also one that `PeftModel.from_pretrained(base, path)` loads.

peft's saved state is not always every trainable tensor: for P-tuning and prefix tuning with a projection it saves the
prompt embeddings the encoder computes, not the encoder. Resume must be bitwise, so the trainable tensors peft's state
does not hold (by storage) go beside it in `trainable_extra.safetensors`; for LoRA, IA³ and AdaLoRA that file is absent.

peft is looked up in `sys.modules` rather than imported: a model cannot be a PeftModel unless peft was imported, and a
plain run should not pay peft's import (seconds: it imports transformers).
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from trainer.callbacks import TrainerCallback
from trainer.errors import TrainerConfigError

ADAPTER_CONFIG_FILE = "adapter_config.json"
ADAPTER_WEIGHTS_FILE = "adapter_model.safetensors"
EXTRA_FILE = "trainable_extra.safetensors"
SUPPORTED_STRATEGIES = ("single", "ddp")


def is_adapter_model(model: Any) -> bool:
    """Whether `model` is a peft.PeftModel (without importing peft when nothing else has)."""
    peft = sys.modules.get("peft")
    return peft is not None and isinstance(model, peft.PeftModel)


def check_strategy(strategy_name: str, model: Any) -> None:
    """Refuse a strategy whose checkpoints and sharding do not know adapters, before any training step."""
    if strategy_name in SUPPORTED_STRATEGIES or not is_adapter_model(model):
        return
    raise TrainerConfigError(
        f"strategy '{strategy_name}' does not support adapter (peft) models yet; adapters train with strategy "
        "'single' or 'ddp' (an adapter is small: DDP replicas fit where FSDP or ZeRO would be needed for the full model)"
    )


def check_prefix_tuning(model: Any) -> None:
    """Refuse prefix tuning on a model that cannot take it, before any step.

    peft feeds the prefix to the model as its key/value cache: through the `past_key_values` argument of the model's
    forward or, for a classification head, of its transformer backbone's forward (peft's own test, mirrored here). A
    model without one (DistilBERT; BERT since transformers 5.24, which renamed it `cache`) fails inside peft at the
    first forward, so say it here, where the alternatives can be named.
    """
    if not is_adapter_model(model) or not any(
        _peft_type(config) == "PREFIX_TUNING" for config in model.peft_config.values()
    ):
        return
    base = model.base_model
    backbone = getattr(model, "transformer_backbone_name", None)
    forwards = [base.forward] + ([base.get_submodule(backbone).forward] if backbone else [])
    if any("past_key_values" in inspect.signature(forward).parameters for forward in forwards):
        return
    transformers = sys.modules.get("transformers")
    version = f" under transformers {transformers.__version__}" if transformers is not None else ""
    raise TrainerConfigError(
        f"prefix_tuning cannot train {type(base).__name__}{version}: peft feeds the prefix through the forward's "
        "past_key_values, which this model does not take; use prompt_tuning, p_tuning or lora instead"
    )


def _peft_type(config: Any) -> str:
    return str(getattr(config.peft_type, "value", config.peft_type))


class AdaLoraAllocation(TrainerCallback):
    """AdaLoRA moves its rank budget between layers as it trains: peft asks the loop to call
    `update_and_allocate(step)` after each optimizer step and before the gradients are zeroed (on_optimizer_step here).
    The Trainer adds this callback itself when the model is an AdaLoRA PeftModel."""

    def on_optimizer_step(
        self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any
    ) -> None:
        module = getattr(model, "module", model)  # under DDP, the user's module
        module.base_model.update_and_allocate(state.global_step)


def needs_rank_allocation(model: Any) -> bool:
    """Whether `model` is an AdaLoRA PeftModel (whose training loop must call update_and_allocate)."""
    if not is_adapter_model(model):
        return False
    return any(_peft_type(c) == "ADALORA" for c in model.peft_config.values())


def _adapter_folders(model: Any, directory: Path) -> dict[str, Path]:
    """peft's save_pretrained layout: the "default" adapter at the top, any other adapter in a subfolder of its name."""
    return {name: directory if name == "default" else directory / name for name in model.peft_config}


def _extra_trainable(model: Any) -> dict[str, torch.Tensor]:
    """Trainable tensors that peft's adapter state does not hold (compared by storage, so renaming does not matter)."""
    from peft.utils import get_peft_model_state_dict

    held = set()
    for name in model.peft_config:
        for tensor in get_peft_model_state_dict(model, adapter_name=name).values():
            held.add(tensor.untyped_storage().data_ptr())
    return {
        name: p.detach().to("cpu").contiguous().clone()
        for name, p in model.named_parameters()
        if p.requires_grad and p.untyped_storage().data_ptr() not in held
    }


def save_adapter(model: Any, directory: Path, *, is_main: bool) -> None:
    """Write the adapter (peft layout) and any trainable tensor outside it; only the main process writes."""
    if not is_main:
        return
    model.save_pretrained(str(directory))
    extra = _extra_trainable(model)
    if extra:
        save_file(extra, str(Path(directory) / EXTRA_FILE), metadata={"format": "pt"})


def load_adapter(model: Any, directory: Path, device: torch.device | str = "cpu") -> None:
    """Restore what `save_adapter` wrote into `model` (every adapter it holds), exactly."""
    from peft.utils import load_peft_weights, set_peft_model_state_dict

    directory = Path(directory)
    for name, folder in _adapter_folders(model, directory).items():
        if not (folder / ADAPTER_WEIGHTS_FILE).is_file():
            raise TrainerConfigError(
                f"{folder} has no {ADAPTER_WEIGHTS_FILE} for adapter '{name}': it is not a checkpoint of this "
                "adapter model (was it saved from the full model?)"
            )
        result = set_peft_model_state_dict(model, load_peft_weights(str(folder), device=str(device)), name)
        # peft loads a prompt method's "prompt_embeddings" itself and still reports the key as unexpected
        unexpected = [key for key in getattr(result, "unexpected_keys", []) if key != "prompt_embeddings"]
        if unexpected:
            raise TrainerConfigError(
                f"{folder}: adapter weights {unexpected[:5]} do not fit the model's adapter '{name}' "
                "(a different peft config?)"
            )
    extra_path = directory / EXTRA_FILE
    if extra_path.is_file():
        missing_or_unexpected = model.load_state_dict(
            load_file(str(extra_path), device=str(device)), strict=False
        )
        if missing_or_unexpected.unexpected_keys:
            raise TrainerConfigError(
                f"{extra_path}: tensors {missing_or_unexpected.unexpected_keys[:5]} are not in the model"
            )
