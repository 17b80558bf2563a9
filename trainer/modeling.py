"""How the Trainer talks to a model: calling it with a batch, finding the labels, and preparing it for training."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from trainer.args import TrainingArguments
from trainer.errors import TrainerConfigError

DEFAULT_LABEL_NAMES = ("labels", "label", "label_ids")


def is_mapping(batch: Any) -> bool:
    return isinstance(batch, Mapping) or (hasattr(batch, "keys") and hasattr(batch, "__getitem__"))


def call_model(model: torch.nn.Module, batch: Any) -> Any:
    """A dict batch is passed as keyword arguments, a tuple or list as positional ones, anything else as is."""
    if type(batch) is dict:  # the usual batch first: a plain dict from default_collate
        return model(**batch)
    if isinstance(batch, (tuple, list)):
        return model(*batch)
    if is_mapping(batch):
        return model(**batch)
    return model(batch)


def label_keys(batch: Any, label_names: list[str] | None) -> list[str]:
    names = label_names if label_names is not None else DEFAULT_LABEL_NAMES
    found = [name for name in names if name in batch]
    return found if label_names is not None else found[:1]


def labels_of(batch: Any, label_names: list[str] | None) -> Any:
    """The labels of a batch: the label_names entries of a dict batch, the last element of a tuple batch."""
    if isinstance(batch, (tuple, list)):
        return batch[-1] if len(batch) > 1 else None
    if is_mapping(batch):
        keys = label_keys(batch, label_names)
        if not keys:
            return None
        return batch[keys[0]] if len(keys) == 1 else tuple(batch[k] for k in keys)
    return None


def split_labels(batch: Any, label_names: list[str] | None) -> tuple[Any, Any]:
    """(model inputs without the labels, labels), for a compute_loss_func that takes the labels itself."""
    if isinstance(batch, (tuple, list)):
        return type(batch)(batch[:-1]), batch[-1]
    if is_mapping(batch):
        keys = label_keys(batch, label_names)
        features = {k: v for k, v in batch.items() if k not in keys}
        labels = None if not keys else batch[keys[0]] if len(keys) == 1 else tuple(batch[k] for k in keys)
        return features, labels
    return batch, None


def prepare_model(model: torch.nn.Module, args: TrainingArguments) -> torch.nn.Module:
    """Gradient checkpointing and torch.compile, applied to the user's module before the strategy wraps it."""
    if args.gradient_checkpointing:
        if not hasattr(model, "gradient_checkpointing_enable"):
            raise TrainerConfigError(
                f"gradient_checkpointing is on but {type(model).__name__} has no gradient_checkpointing_enable(); "
                "use a transformers model, add that method, or turn the option off"
            )
        kwargs = args.gradient_checkpointing_kwargs
        # a model's own gradient_checkpointing_enable() may take no arguments: pass them only when given
        model.gradient_checkpointing_enable(**({"gradient_checkpointing_kwargs": kwargs} if kwargs else {}))
    if args.tf32 is not None:  # process-wide, as transformers sets it
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        torch.backends.cudnn.allow_tf32 = args.tf32
    if args.torch_compile and not getattr(model, "_trainer_compiled", False):
        options = {"backend": args.torch_compile_backend or "inductor", "mode": args.torch_compile_mode}
        model.compile(**options)  # in place: the module and its state_dict keys stay as they are
        model._trainer_compiled = True
    return model


def training_flos_per_token(model: torch.nn.Module) -> int:
    """Floating-point operations of a forward and backward pass per input token: 6 x the non-embedding parameters
    (the estimate transformers uses for `total_flos`). Counted once, so the loop pays nothing per step."""
    embedding = {id(p) for m in model.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters()}
    return 6 * sum(p.numel() for p in model.parameters() if id(p) not in embedding)
