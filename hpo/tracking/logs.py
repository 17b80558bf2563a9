"""What the tracking callbacks and the store's writer read from the Trainer: the numbers of a log record, the state
worth keeping, the arguments as a dict, and whether a sibling pruning callback stopped the run."""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any

# TrainerState fields not worth a copy in the runs row (the metrics table already holds the log history).
_STATE_SKIP = {"log_history", "stateful_callbacks"}


def numeric_items(logs: dict[str, Any]) -> dict[str, float]:
    """The numbers of a log record (bools and strings dropped); step and epoch have their own columns."""
    return {
        name: float(value)
        for name, value in logs.items()
        if name not in ("step", "epoch") and isinstance(value, numbers.Real) and not isinstance(value, bool)
    }


def arguments_dict(args: Any) -> dict[str, Any] | None:
    if args is None:
        return None
    return args.to_dict() if hasattr(args, "to_dict") else dict(vars(args))


def state_summary(state: Any) -> dict[str, Any]:
    fields = dataclasses.asdict(state) if dataclasses.is_dataclass(state) else dict(vars(state))
    return {k: v for k, v in fields.items() if k not in _STATE_SKIP}


def pruned_by_sibling(kwargs: dict[str, Any]) -> bool:
    """Whether a pruning callback in the same Trainer stopped this run (it exposes a non-None `pruned_step`)."""
    handler = getattr(kwargs.get("trainer"), "callback_handler", None)
    return any(getattr(cb, "pruned_step", None) is not None for cb in getattr(handler, "callbacks", []))
