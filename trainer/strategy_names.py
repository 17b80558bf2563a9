"""Which strategy a run's arguments name, "auto" resolved; apart from trainer.strategies (which imports torch), so a
study file's `training:` section is checked without torch (`hpo status`, `hpo validate`)."""

from __future__ import annotations

from typing import Any

from trainer.errors import TrainerConfigError
from trainer.rank_layout import rank_layout


def resolve_strategy_name(args: Any, world_size: int | None = None) -> str:
    """`args.strategy`, with "auto" resolved: deepspeed when a DeepSpeed config is given, fsdp with an fsdp_config,
    ddp when a launcher started several ranks (RANK/WORLD_SIZE), single otherwise."""
    name = getattr(args, "strategy", "auto") or "auto"
    world_size = rank_layout().world_size if world_size is None else world_size
    if name == "auto":
        if getattr(args, "deepspeed", None) is not None:
            return "deepspeed"
        if getattr(args, "fsdp_config", None) is not None:
            return "fsdp"
        return "ddp" if world_size > 1 else "single"
    if name == "single" and world_size > 1:
        raise TrainerConfigError(
            f"strategy 'single' was asked for, but a launcher started {world_size} processes: each would train its "
            "own copy. Use strategy 'ddp', 'fsdp', 'deepspeed' or 'auto', or start one process"
        )
    return name
