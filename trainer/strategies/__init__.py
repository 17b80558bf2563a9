"""Strategies: where the model lives and how it crosses processes. `create_strategy(args)` picks one."""

from __future__ import annotations

from typing import Any

from trainer.distributed import rank_layout
from trainer.errors import TrainerConfigError
from trainer.strategies.base import Strategy
from trainer.strategies.single import SingleDeviceStrategy

__all__ = ["Strategy", "SingleDeviceStrategy", "create_strategy", "resolve_strategy_name"]


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


def create_strategy(args: Any) -> Strategy:
    """The strategy named by `args.strategy` (see `resolve_strategy_name` for "auto")."""
    name = resolve_strategy_name(args)
    # Each parallel strategy's module is imported only when chosen: FSDP's imports alone cost ~0.6 s, which a
    # single-device run (every study trial, by default) should not pay.
    if name == "single":
        return SingleDeviceStrategy(args)
    if name == "ddp":
        from trainer.strategies.ddp import DDPStrategy

        return DDPStrategy(args)
    if name == "fsdp":
        from trainer.strategies.fsdp import FSDPStrategy

        return FSDPStrategy(args)
    if name == "deepspeed":
        from trainer.strategies.deepspeed import DeepSpeedStrategy

        return DeepSpeedStrategy(args)
    raise TrainerConfigError(f"unknown strategy '{name}'; choose one of auto, single, ddp, fsdp, deepspeed")
