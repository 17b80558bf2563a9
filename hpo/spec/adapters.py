"""The `peft:` section of run and study files: train an adapter (LoRA, AdaLoRA, IA³, prefix/prompt/P-tuning) instead of
the whole model.

    peft:
      method: lora                       # lora | adalora | ia3 | prefix_tuning | p_tuning | prompt_tuning
      r: 8                               # any field of the method's peft config class (LoraConfig here)
      lora_alpha: 16
      target_modules: [query, value]     # or "query,value" (a comma-separated string, as search choices are)

peft's own config classes are the single source of truth: an option is valid when it is a field of the method's class
(LoraConfig, AdaLoraConfig, IA3Config, PrefixTuningConfig, PromptEncoderConfig, PromptTuningConfig), and values are
checked by constructing that class. A search_space parameter named like one of those fields is sampled into the
adapter's config (target `peft`); categorical choices are scalars, so a choice of target_modules is a comma-separated
string ("query,value"); "all-linear" keeps peft's meaning. `task_type` may be left out: the trial infers it from the
model class (…ForSequenceClassification -> SEQ_CLS, so the new head trains with the adapter).

peft is imported inside these functions on purpose: it imports transformers (seconds), which a file without a `peft:`
section, and every command that never builds a config, should not pay.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

from hpo.spec.errors import FieldProblem

METHODS = {
    "lora": "LoraConfig",
    "adalora": "AdaLoraConfig",
    "ia3": "IA3Config",
    "prefix_tuning": "PrefixTuningConfig",
    "p_tuning": "PromptEncoderConfig",
    "prompt_tuning": "PromptTuningConfig",
}
# Fields of peft's config classes that the method or hpo decides; not options of the section.
DECIDED = {
    "peft_type",
    "peft_version",
    "base_model_name_or_path",
    "revision",
    "inference_mode",
    "auto_mapping",
}
ALL_LINEAR = "all-linear"


def config_class(method: str) -> type:
    try:
        import peft
    except ImportError as error:
        raise FieldProblem(
            "peft", "needs the peft package: pip install 'hpo[peft]' (or pip install peft)"
        ) from error
    return getattr(peft, METHODS[method])


def option_names(method: str) -> tuple[str, ...]:
    """The options of `method`: the fields of its peft config class, less those the method decides."""
    return tuple(f.name for f in dataclasses.fields(config_class(method)) if f.init and f.name not in DECIDED)


def method_of(section: dict[str, Any]) -> str:
    method = section.get("method")
    if method is None:
        raise FieldProblem("peft.method", f"required; choose one of {', '.join(METHODS)}")
    if method not in METHODS:
        close = difflib.get_close_matches(str(method), list(METHODS), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise FieldProblem(
            "peft.method", f"{method!r} is not a peft method; choose one of {', '.join(METHODS)}{hint}"
        )
    return str(method)


def check_options(method: str, options: dict[str, Any], where: str = "peft") -> None:
    valid = option_names(method)
    for key in options:
        if key in valid:
            continue
        reason = "is decided by hpo" if key in DECIDED else f"is not an option of peft's {METHODS[method]}"
        close = difflib.get_close_matches(str(key), valid, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise FieldProblem(f"{where}.{key}", f"{reason}; {hint}valid options: {', '.join(valid)}")


def build_config(
    section: dict[str, Any], sampled: dict[str, Any] | None = None, task_type: str | None = None
) -> Any:
    """peft's config object for the section with the sampled values applied (`task_type` fills a missing one)."""
    method = method_of(section)
    options = {k: v for k, v in {**section, **(sampled or {})}.items() if k != "method"}
    check_options(method, options)
    if "target_modules" in options:
        options["target_modules"] = target_modules(options["target_modules"])
    if task_type is not None and options.get("task_type") is None:
        options["task_type"] = task_type
    try:
        return config_class(method)(**options)
    except (TypeError, ValueError) as error:
        raise FieldProblem(field_named(str(error), options), f"peft refused the value: {error}") from error


def target_modules(value: Any) -> Any:
    """A comma-separated string (a search choice) becomes the list of names peft takes; "all-linear" stays."""
    if isinstance(value, str) and value != ALL_LINEAR:
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def check_section(section: dict[str, Any] | None) -> None:
    """Refuse an unknown method, an unknown option, or a value peft's config class refuses."""
    if section is not None:
        build_config(section)


def check_strategy(training: dict[str, Any], multi_rank_strategy: str | None = None) -> None:
    """The Trainer checkpoints and shards adapters under single and ddp only: refuse FSDP and DeepSpeed up front."""
    chosen = [
        (f"training.{key}", name)
        for key, name in (
            ("strategy", training.get("strategy")),
            ("fsdp_config", "fsdp"),
            ("deepspeed", "deepspeed"),
        )
        if training.get(key) is not None and name in ("fsdp", "deepspeed")
    ]
    if multi_rank_strategy in ("fsdp", "deepspeed"):
        chosen.append(("resources.strategy", multi_rank_strategy))
    if chosen:
        field, name = chosen[0]
        raise FieldProblem(
            field,
            f"{name} does not train adapters (peft:) yet; adapters train on one device or with ddp "
            "(remove it, or set it to ddp)",
        )


def field_named(message: str, options: dict[str, Any]) -> str:
    """The option a peft error message names (peft's messages quote the field), else the section itself."""
    named = [key for key in options if key in message]
    return f"peft.{max(named, key=len)}" if named else "peft"
