"""Wrap a task's model in the adapter its file's `peft:` section asks for (peft's `get_peft_model`).

Target modules are checked with peft's own matcher before the model is wrapped, so a name that matches nothing is a
configuration error (exit 2) that lists the model's linear layers, not a stack trace from deep inside peft. A study
checks every categorical choice of target_modules in its dry run, not only the first.
"""

from __future__ import annotations

from typing import Any

import torch

from hpo.errors import ConfigError
from hpo.spec import adapters
from hpo.spec.errors import FieldProblem
from trainer.adapters import check_prefix_tuning
from trainer.errors import TrainerConfigError

# transformers' class name suffix -> peft's task type (which head trains with the adapter, and how prompts are fed).
TASK_TYPES = {
    "ForSequenceClassification": "SEQ_CLS",
    "ForTokenClassification": "TOKEN_CLS",
    "ForQuestionAnswering": "QUESTION_ANS",
    "ForCausalLM": "CAUSAL_LM",
    "ForConditionalGeneration": "SEQ_2_SEQ_LM",
    "ForSeq2SeqLM": "SEQ_2_SEQ_LM",
}


def infer_task_type(model: torch.nn.Module) -> str | None:
    name = type(model).__name__
    return next((task for suffix, task in TASK_TYPES.items() if name.endswith(suffix)), None)


def peft_config(
    model: torch.nn.Module, section: dict[str, Any], sampled: dict[str, Any] | None = None
) -> Any:
    """peft's config for this model: the section, the sampled options, and the task type the model's class implies."""
    try:
        return adapters.build_config(section, sampled, task_type=infer_task_type(model))
    except FieldProblem as problem:
        raise ConfigError(f"{problem.field}: {problem.message}") from problem


def linear_layer_names(model: torch.nn.Module) -> list[str]:
    """The distinct last names of the model's linear layers (what target_modules usually lists)."""
    names = {
        name.rsplit(".", 1)[-1]
        for name, module in model.named_modules()
        if name and (isinstance(module, torch.nn.Linear) or type(module).__name__ == "Conv1D")
    }
    return sorted(names)


def check_target_modules(model: torch.nn.Module, config: Any) -> None:
    """Refuse target modules (or layers_to_transform) that match no module of the model, by peft's own matcher."""
    wanted = getattr(config, "target_modules", None)
    if wanted is None or wanted == adapters.ALL_LINEAR:
        return
    from peft.tuners.tuners_utils import check_target_module_exists

    if any(check_target_module_exists(config, name) for name, _ in model.named_modules() if name):
        return
    shown = ", ".join(sorted(wanted)) if isinstance(wanted, (set, list, tuple)) else repr(wanted)
    raise ConfigError(
        f"peft.target_modules: {shown} match no layer of {type(model).__name__}; its linear layers are "
        f"{', '.join(linear_layer_names(model))} (or use all-linear)"
    )


def wrap_model(model: torch.nn.Module, section: dict[str, Any], sampled: dict[str, Any] | None = None) -> Any:
    """The model with the adapter added (a peft.PeftModel whose base weights are frozen)."""
    from peft import get_peft_model

    config = peft_config(model, section, sampled)
    check_target_modules(model, config)
    try:
        wrapped = get_peft_model(model, config)
    except ValueError as error:  # peft checks some values only when it builds the layers (e.g. r must be > 0)
        options = {**section, **(sampled or {})}
        raise ConfigError(
            f"{adapters.field_named(str(error), options)}: peft refused the adapter: {error}"
        ) from error
    try:  # the dry run only evaluates: refuse here what would fail at the first forward of every trial
        check_prefix_tuning(wrapped)
    except TrainerConfigError as error:
        raise ConfigError(f"peft.method: {error}") from error
    return wrapped


def check_choices(model: torch.nn.Module, section: dict[str, Any], choices: dict[str, list[Any]]) -> None:
    """Check each value a searched target_modules can take against the model (the dry run builds one model)."""
    for name, values in choices.items():
        for value in values:
            check_target_modules(model, peft_config(model, section, {name: value}))
