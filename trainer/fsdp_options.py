"""`fsdp_config` checking, apart from the FSDP strategy so `TrainingArguments` can validate without torch.distributed.

Keys are documented in `trainer/strategies/fsdp.py`.
"""

from __future__ import annotations

FULL, SHARDED = "FULL_STATE_DICT", "SHARDED_STATE_DICT"
FSDP_CONFIG_KEYS = {
    "transformer_layer_cls_to_wrap",
    "min_num_params",
    "reshard_after_forward",
    "cpu_offload",
    "state_dict_type",
}


def validate_fsdp_config(config: dict | None) -> dict:
    """Check `fsdp_config`; returns it with defaults filled. Raises ValueError naming the key and the fix."""
    config = dict(config or {})
    unknown = sorted(set(config) - FSDP_CONFIG_KEYS)
    if unknown:
        raise ValueError(
            f"fsdp_config: unknown key(s) {unknown}; allowed keys are {sorted(FSDP_CONFIG_KEYS)}"
        )
    classes = config.get("transformer_layer_cls_to_wrap") or []
    if isinstance(classes, str):
        classes = [name.strip() for name in classes.split(",") if name.strip()]
    config["transformer_layer_cls_to_wrap"] = list(classes)
    min_params = config.get("min_num_params", 0) or 0
    if not isinstance(min_params, int) or min_params < 0:
        raise ValueError(f"fsdp_config.min_num_params must be a non-negative integer, got {min_params!r}")
    config["min_num_params"] = min_params
    config.setdefault("reshard_after_forward", True)
    config.setdefault("cpu_offload", False)
    config["state_dict_type"] = str(config.get("state_dict_type") or FULL).upper()
    if config["state_dict_type"] not in (FULL, SHARDED):
        raise ValueError(
            f"fsdp_config.state_dict_type must be {FULL} or {SHARDED}, got {config['state_dict_type']!r}"
        )
    return config
