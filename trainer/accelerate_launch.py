"""The settings `accelerate launch` exports (ACCELERATE_*, FSDP_*), applied to `TrainingArguments` as transformers'
Trainer gets them through accelerate.

`accelerate launch --mixed_precision bf16 train.py` trains in bf16, `--use_fsdp` shards with FSDP (the FSDP_* options
become fsdp_config), `--use_deepspeed` runs DeepSpeed (ACCELERATE_DEEPSPEED_CONFIG_FILE, or the ZeRO stage and offload
devices), `--cpu` trains on the CPU and `--dynamo_backend` compiles. Where a launcher setting contradicts an argument
the script set (bf16 against fp16, FSDP against strategy 'deepspeed' ...), the arguments are refused in one line:
transformers lets one side win silently, and which one depends on the setting.
"""

from __future__ import annotations

import os
from typing import Any

from trainer.errors import TrainerConfigError

_TRUE = ("1", "true", "yes")


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def _conflict(setting: str, value: str, argument: str, current: Any) -> TrainerConfigError:
    return TrainerConfigError(
        f"accelerate launch sets {setting}={value} but the training argument '{argument}' is {current!r}; "
        f"change one of them so they agree"
    )


def apply_accelerate_launch(args: Any) -> None:
    """Fill the arguments from the launcher's environment; refuse the ones that contradict it."""
    _mixed_precision(args)
    if _flag("ACCELERATE_USE_CPU"):
        args.use_cpu = True
    _compile(args)
    if _flag("ACCELERATE_USE_FSDP"):
        _strategy(args, "fsdp", "ACCELERATE_USE_FSDP")
        args.fsdp_config = {**_fsdp_config_from_environment(), **(args.fsdp_config or {})}
    if _flag("ACCELERATE_USE_DEEPSPEED"):
        _strategy(args, "deepspeed", "ACCELERATE_USE_DEEPSPEED")
        if args.deepspeed is None:
            args.deepspeed = (
                os.environ.get("ACCELERATE_DEEPSPEED_CONFIG_FILE") or _deepspeed_config_from_environment()
            )


def _mixed_precision(args: Any) -> None:
    precision = os.environ.get("ACCELERATE_MIXED_PRECISION", "no").strip().lower()
    if precision in ("", "no"):
        return  # the arguments decide, as they do in transformers
    if precision not in ("fp16", "bf16"):
        raise TrainerConfigError(
            f"accelerate launch sets ACCELERATE_MIXED_PRECISION={precision}, which this Trainer does not support; "
            "launch with --mixed_precision bf16, fp16 or no"
        )
    other = "fp16" if precision == "bf16" else "bf16"
    if getattr(args, other):
        raise _conflict("ACCELERATE_MIXED_PRECISION", precision, other, True)
    setattr(args, precision, True)


def _compile(args: Any) -> None:
    backend = os.environ.get("ACCELERATE_DYNAMO_BACKEND", "no").strip().lower()
    if backend in ("", "no"):
        return
    if args.torch_compile_backend not in (None, backend):
        raise _conflict(
            "ACCELERATE_DYNAMO_BACKEND", backend, "torch_compile_backend", args.torch_compile_backend
        )
    args.torch_compile, args.torch_compile_backend = True, backend
    mode = os.environ.get("ACCELERATE_DYNAMO_MODE")
    if mode and args.torch_compile_mode is None:
        args.torch_compile_mode = mode


def _strategy(args: Any, name: str, setting: str) -> None:
    if args.strategy not in ("auto", name):
        raise _conflict(setting, "true", "strategy", args.strategy)
    args.strategy = name


# accelerate's FSDP1 sharding strategies (names or their numbers) -> reshard_after_forward
_RESHARD = {
    "FULL_SHARD": True,
    "1": True,
    "SHARD_GRAD_OP": False,
    "2": False,
    "HYBRID_SHARD": True,
    "4": True,
}


def _fsdp_config_from_environment() -> dict[str, Any]:
    config: dict[str, Any] = {}
    policy = os.environ.get("FSDP_AUTO_WRAP_POLICY", "").upper()
    classes = os.environ.get("FSDP_TRANSFORMER_CLS_TO_WRAP")
    if classes and policy in ("", "TRANSFORMER_BASED_WRAP"):
        config["transformer_layer_cls_to_wrap"] = [c.strip() for c in classes.split(",") if c.strip()]
    if policy == "SIZE_BASED_WRAP" and os.environ.get("FSDP_MIN_NUM_PARAMS"):
        config["min_num_params"] = int(os.environ["FSDP_MIN_NUM_PARAMS"])
    if "FSDP_OFFLOAD_PARAMS" in os.environ:
        config["cpu_offload"] = _flag("FSDP_OFFLOAD_PARAMS")
    if os.environ.get("FSDP_VERSION", "1") == "2" and "FSDP_RESHARD_AFTER_FORWARD" in os.environ:
        config["reshard_after_forward"] = _flag("FSDP_RESHARD_AFTER_FORWARD")
    else:
        sharding = os.environ.get("FSDP_SHARDING_STRATEGY", "FULL_SHARD").upper()
        if sharding in ("NO_SHARD", "3"):
            raise TrainerConfigError(
                "accelerate launch sets FSDP_SHARDING_STRATEGY=NO_SHARD: that is plain data parallelism; launch "
                "without --use_fsdp (strategy 'ddp')"
            )
        config["reshard_after_forward"] = _RESHARD.get(sharding, True)
    if os.environ.get("FSDP_STATE_DICT_TYPE"):
        config["state_dict_type"] = os.environ["FSDP_STATE_DICT_TYPE"]
    return config


def _deepspeed_config_from_environment() -> dict[str, Any]:
    zero: dict[str, Any] = {"stage": int(os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", "2"))}
    for setting, key in (
        ("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "offload_optimizer"),
        ("ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE", "offload_param"),
    ):
        device = os.environ.get(setting, "none").lower()
        if device != "none":
            zero[key] = {"device": device}
    return {"zero_optimization": zero}
