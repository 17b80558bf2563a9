"""A DeepSpeed config from `TrainingArguments.deepspeed` (a dict or a JSON file), with `"auto"` values filled from the
arguments the way the Hugging Face Trainer fills them, and explicit values that contradict the arguments rejected.

Pure data in, data out (no deepspeed import), so `TrainingArguments` can validate a config when it is constructed.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

AUTO = "auto"
DEFAULT_CONFIG: dict[str, Any] = {"zero_optimization": {"stage": 2}}

# zero_optimization sizes HF derives from the model's hidden size; without one, DeepSpeed's own defaults apply.
_ZERO_AUTO_TO_DEFAULT = (
    "reduce_bucket_size",
    "allgather_bucket_size",
    "stage3_prefetch_bucket_size",
    "stage3_param_persistence_threshold",
    "stage3_max_live_parameters",
    "stage3_max_reuse_distance",
)


class DeepSpeedConfigError(ValueError):
    """A DeepSpeed config that cannot be used; the message names the key and the fix."""


def read_deepspeed_config(source: str | Path | dict | None) -> dict[str, Any]:
    """The config as a fresh dict: a dict is copied, a path is read as JSON, None gives ZeRO stage 2 defaults."""
    if source is None:
        return copy.deepcopy(DEFAULT_CONFIG)
    if isinstance(source, dict):
        return copy.deepcopy(source)
    path = Path(source)
    if not path.is_file():
        raise DeepSpeedConfigError(
            f"deepspeed: config file {path} does not exist; give a JSON file path or a dict"
        )
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise DeepSpeedConfigError(f"deepspeed: {path} is not valid JSON ({error})") from error
    if not isinstance(config, dict):
        raise DeepSpeedConfigError(f"deepspeed: {path} must hold a JSON object, got {type(config).__name__}")
    return config


def zero_stage(config: dict[str, Any]) -> int:
    return int(config.get("zero_optimization", {}).get("stage", 0))


def fill_deepspeed_config(
    source: str | Path | dict | None, args: Any, world_size: int | None, total_steps: int | None = None
) -> dict[str, Any]:
    """The config DeepSpeed gets: every "auto" replaced, every explicit value checked against `args`.

    `world_size=None` (checking arguments before any rank exists) leaves `train_batch_size` unchecked."""
    config = read_deepspeed_config(source)
    micro = args.per_device_train_batch_size
    accumulation = args.gradient_accumulation_steps
    _set(config, "train_micro_batch_size_per_gpu", micro, "per_device_train_batch_size")
    _set(config, "gradient_accumulation_steps", accumulation, "gradient_accumulation_steps")
    if world_size is not None:
        total = micro * accumulation * world_size
        _set(config, "train_batch_size", total, "per_device_train_batch_size x accumulation x ranks")
    _set(config, "gradient_clipping", float(args.max_grad_norm or 0.0), "max_grad_norm")
    _fill_precision(config, args)
    _fill_optimizer(config, args)
    _fill_scheduler(config, args, total_steps)
    _fill_zero(config)
    # A client (torch) optimizer is the norm here: let ZeRO take it, also with CPU offload.
    config.setdefault("zero_allow_untested_optimizer", True)
    config.setdefault("zero_force_ds_cpu_optimizer", False)
    # The Trainer logs; DeepSpeed's own progress lines would only repeat it.
    config.setdefault("steps_per_print", 10**9)
    _reject_leftover_auto(config)
    return config


def _set(section: dict, key: str, value: Any, arg_name: str, prefix: str = "") -> None:
    """Fill `key` when missing or "auto"; an explicit value must agree with the argument it mirrors."""
    current = section.get(key, AUTO)
    if current == AUTO:
        section[key] = value
    elif not _same(current, value):
        raise DeepSpeedConfigError(
            f'deepspeed config {prefix}{key}={current!r} contradicts {arg_name}={value!r}; set it to "auto" or make '
            f"them equal"
        )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(float(a) - float(b)) <= 1e-12 * max(1.0, abs(float(b)))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _fill_precision(config: dict, args: Any) -> None:
    for key, flag in (("bf16", bool(args.bf16)), ("fp16", bool(args.fp16))):
        section = config.get(key)
        if key == "bf16" and zero_stage(config) == 0 and (section is None or section.get("enabled") == AUTO):
            # Without ZeRO, DeepSpeed's bf16 mode trains bf16 weights with no fp32 master copy. The Trainer's bf16
            # autocast gives bf16 compute on fp32 weights instead, as under DDP; bf16.enabled=true still opts in.
            config.pop(key, None)
            continue
        if section is None:
            if flag:
                config[key] = {"enabled": True}
            continue
        _set(section, "enabled", flag, key, prefix=f"{key}.")


def _fill_optimizer(config: dict, args: Any) -> None:
    params = config.get("optimizer", {}).get("params")
    if params is None:
        return
    _set(params, "lr", args.learning_rate, "learning_rate", "optimizer.params.")
    _set(params, "betas", [args.adam_beta1, args.adam_beta2], "adam_beta1/adam_beta2", "optimizer.params.")
    _set(params, "eps", args.adam_epsilon, "adam_epsilon", "optimizer.params.")
    _set(params, "weight_decay", args.weight_decay, "weight_decay", "optimizer.params.")


def _fill_scheduler(config: dict, args: Any, total_steps: int | None) -> None:
    params = config.get("scheduler", {}).get("params")
    if params is None:
        return
    steps = total_steps or (args.max_steps if getattr(args, "max_steps", 0) > 0 else None)
    if params.get("total_num_steps") == AUTO and steps is None:
        raise DeepSpeedConfigError(
            'deepspeed config scheduler.params.total_num_steps is "auto" but the number of steps is unknown; set '
            "max_steps, or give total_num_steps explicitly"
        )
    warmup = _warmup_steps(args, steps)
    _set(params, "warmup_min_lr", 0.0, "0", "scheduler.params.")
    _set(params, "warmup_max_lr", args.learning_rate, "learning_rate", "scheduler.params.")
    _set(params, "warmup_num_steps", warmup, "warmup_steps/warmup_ratio", "scheduler.params.")
    if "total_num_steps" in params:
        _set(params, "total_num_steps", steps, "max_steps", "scheduler.params.")


def _warmup_steps(args: Any, steps: int | None) -> int:
    """TrainingArguments.get_warmup_steps, which transformers fills warmup_num_steps with, for arguments of any shape:
    warmup_steps, a fraction of the steps when below 1, else warmup_ratio."""
    if args.warmup_steps >= 1:
        return int(args.warmup_steps)
    return math.ceil(steps * (args.warmup_steps or args.warmup_ratio)) if steps else 0


def _fill_zero(config: dict) -> None:
    zero = config.get("zero_optimization")
    if not isinstance(zero, dict):
        return
    stage = zero.get("stage", 0)
    if stage not in (0, 1, 2, 3):
        raise DeepSpeedConfigError(
            f"deepspeed config zero_optimization.stage must be 0, 1, 2 or 3, got {stage!r}"
        )
    for key in _ZERO_AUTO_TO_DEFAULT:
        if zero.get(key) == AUTO:
            del zero[key]


def _reject_leftover_auto(config: Any, path: str = "") -> None:
    if isinstance(config, dict):
        for key, value in config.items():
            _reject_leftover_auto(value, f"{path}{key}.")
    elif config == AUTO:
        raise DeepSpeedConfigError(
            f'deepspeed config {path.rstrip(".")} is "auto" but has no TrainingArguments counterpart; give a value'
        )
