"""Strategies: where the model lives and how it crosses processes. `create_strategy(args)` picks one."""

from __future__ import annotations

from typing import Any

from trainer.errors import TrainerConfigError
from trainer.strategies.base import Strategy
from trainer.strategies.single import SingleDeviceStrategy
from trainer.strategy_names import resolve_strategy_name

__all__ = ["Strategy", "SingleDeviceStrategy", "create_strategy", "resolve_strategy_name"]


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
