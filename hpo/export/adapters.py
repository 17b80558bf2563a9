"""Exporting adapter (peft:) trials: the adapter in peft's layout over a base model reference, a merged plain model
(`--merge`), or the top K trials' adapters as named adapters over one base (`--top K`).

Folder of an adapter export (peft's own layout: `PeftModel.from_pretrained(base, folder)` loads it, and a named
adapter lives in a subfolder of its name, as `save_pretrained` writes several adapters):

    adapter_config.json, adapter_model.safetensors      one adapter (plain export)
    trial-12/adapter_config.json, trial-12/adapter_model.safetensors, trial-7/...   named adapters (--top K)
    tokenizer files, export.json (base model: model_init + params + name_or_path; the adapters and their metrics)

The base model is never copied: it is rebuilt by the task's `model_init(params)` (the pretrained weights it loads are
the reference) and the adapter is applied on top, as each trial did.
"""

from __future__ import annotations

from typing import Any

import torch

from hpo.errors import ConfigError
from hpo.export.select import ExportSource
from hpo.spec import Task
from hpo.trial.adapter import wrap_model
from trainer import set_seed
from trainer.adapters import load_adapter

ADAPTER_FILE = "adapter_model.safetensors"


def adapter_model(source: ExportSource, task: Task) -> Any:
    """The trial's model as it trained: the task's base model with its adapter, weights from its checkpoint."""
    set_seed(
        int(source.arguments.get("seed", 42))
    )  # as the trial did before model_init (a new head is random)
    model = wrap_model(task.model_init(dict(source.model_params)), source.spec.peft or {}, source.peft_params)
    load_adapter(model, source.checkpoint)
    return model.eval()


def base_reference(model: Any, source: ExportSource) -> dict[str, Any]:
    """What rebuilds the base model: the task's model_init and params, and the pretrained weights' name or path."""
    config = next(iter(model.peft_config.values()))
    return {
        "model_init": source.spec.task.model_init,
        "model_params": source.model_params,
        "name_or_path": config.base_model_name_or_path,
        "seed": int(source.arguments.get("seed", 42)),
    }


def adapter_entry(source: ExportSource, model: Any) -> dict[str, Any]:
    config = model.peft_config["default"]
    return {
        "trial_number": source.trial_number,
        "method": str(getattr(config.peft_type, "value", config.peft_type)).lower(),
        "params": source.params,
        "metrics": source.recorded_metrics,
        "objectives": dict(zip(source.metrics, source.values or [], strict=False)),
        "checkpoint": str(source.checkpoint),
        "step": source.step,
        "trainable_params": sum(p.numel() for p in model.parameters() if p.requires_grad),
    }


def merged_model(model: Any) -> torch.nn.Module:
    """The adapter folded into the base weights: a plain model of the base's class (peft's merge_and_unload)."""
    return model.merge_and_unload()


def check_same_base(sources: list[ExportSource]) -> None:
    """Named adapters share one base model, so every trial must have built the same one."""
    first = sources[0]
    for other in sources[1:]:
        if other.model_params != first.model_params:
            raise ConfigError(
                f"--top: trials {first.trial_number} and {other.trial_number} built their base model with different "
                f"model: parameters ({first.model_params} vs {other.model_params}); export them one by one (--trial N)"
            )
