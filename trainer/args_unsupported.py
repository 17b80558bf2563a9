"""The fields of transformers' `TrainingArguments` that cannot apply to this Trainer, and why.

Each is accepted at transformers' default, so `TrainingArguments(**their_dict)` and HfArgumentParser command lines
work; set to anything else it is refused with one line naming the field, the reason and what to do instead.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from trainer.errors import TrainerConfigError

_OFFLINE = "this Trainer works offline and has no Hugging Face Hub integration"
_TRACKIO = "trackio is not a report_to integration here; use report_to 'wandb' or 'tensorboard'"

# field -> (why it cannot apply, what to do instead)
UNSUPPORTED: dict[str, tuple[str, str]] = {
    "push_to_hub": (_OFFLINE, "save with trainer.save_model() and upload the folder yourself"),
    "hub_token": (_OFFLINE, "remove it"),
    "hub_private_repo": (_OFFLINE, "remove it"),
    "hub_model_id": (_OFFLINE, "remove it"),
    "hub_strategy": (_OFFLINE, "remove it"),
    "hub_always_push": (_OFFLINE, "remove it"),
    "hub_revision": (_OFFLINE, "remove it"),
    "project": (_TRACKIO, "remove it"),
    "trackio_space_id": (_TRACKIO, "remove it"),
    "trackio_bucket_id": (_TRACKIO, "remove it"),
    "trackio_static_space_id": (_TRACKIO, "remove it"),
    "use_liger_kernel": ("Liger kernels are not integrated", "apply them to the model before the Trainer"),
    "liger_kernel_config": ("Liger kernels are not integrated", "apply them to the model before the Trainer"),
    "optim_target_modules": (
        "the optimizers that take target modules (GaLore, APOLLO) are not available",
        "choose an optim of this Trainer",
    ),
    "accelerator_config": (
        "the Trainer does not run through an accelerate Accelerator",
        "use strategy, fsdp_config or deepspeed",
    ),
    "parallelism_config": (
        "tensor, context and sequence parallelism are not available",
        "use strategy 'fsdp' or 'deepspeed'",
    ),
    "fsdp": (
        "FSDP is chosen with strategy 'fsdp' and its options in fsdp_config",
        "set strategy: fsdp and put the options in fsdp_config",
    ),
    "enable_jit_checkpoint": (
        "checkpoints on a preemption signal are not available",
        "save with save_strategy; checkpoints are written atomically",
    ),
    "eval_use_gather_object": ("evaluation gathers tensors only", "return tensors from the model"),
    "eval_do_concat_batches": (
        "evaluation always concatenates the batches' predictions",
        "use batch_eval_metrics for per-batch metrics",
    ),
    "average_tokens_across_devices": (
        "the loss is averaged over each rank's samples, then over ranks",
        "remove it (see docs/compat.md)",
    ),
    "use_cache": (
        "the model's cache setting is left as the model has it",
        "set model.config.use_cache yourself",
    ),
    "dataloader_in_order": ("batches are always read in order", "remove it"),
    "train_sampling_strategy": (
        "the training order is always a seeded random permutation per epoch",
        "pass a pre-ordered dataset, or a DataLoader via get_train_dataloader",
    ),
    "length_column_name": ("grouping by length is not available", "remove it"),
    "debug": ("transformers' debug modes (TPU metrics, underflow/overflow) are not available", "remove it"),
}


def check_unsupported(args: Any) -> None:
    """Refuse any field of UNSUPPORTED set to something other than its default."""
    for field in dataclasses.fields(args):
        if field.name not in UNSUPPORTED:
            continue
        value = getattr(args, field.name)
        if value == field.default or (field.name == "debug" and value in ("", [], None)):
            continue
        why, instead = UNSUPPORTED[field.name]
        raise TrainerConfigError(
            f"training argument '{field.name}' is {value!r} but {why}; {instead} (it is accepted only at its "
            f"default {field.default!r})"
        )
