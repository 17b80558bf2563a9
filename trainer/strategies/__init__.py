"""Strategies: where the model lives and how it crosses processes. `create_strategy(args)` picks one."""

from __future__ import annotations

from typing import Any

from trainer.strategies.base import Strategy
from trainer.strategies.single import SingleDeviceStrategy

__all__ = ["Strategy", "SingleDeviceStrategy", "create_strategy"]


def create_strategy(args: Any) -> Strategy:
    """The strategy named by `args.strategy`; "auto" means single for now (ddp/fsdp/deepspeed are added beside it)."""
    name = getattr(args, "strategy", "auto")
    if name in ("auto", "single"):
        return SingleDeviceStrategy(args)
    from trainer.errors import TrainerConfigError

    raise TrainerConfigError(f"strategy '{name}' is not available in this build; use 'single' or 'auto'")
