"""What the integrations share: transformers' metric names per section and the default TensorBoard folder."""

from __future__ import annotations

import datetime
import math
import numbers
import os
import socket
from typing import Any


def rewrite_logs(logs: dict[str, Any]) -> dict[str, Any]:
    """transformers' `rewrite_logs`: `eval_loss` -> `eval/loss`, `test_x` -> `test/x`, anything else -> `train/...`,
    so that TensorBoard and wandb group a run's curves by section."""
    rewritten = {}
    for key, value in logs.items():
        if key.startswith("eval_"):
            rewritten["eval/" + key[len("eval_") :]] = value
        elif key.startswith("test_"):
            rewritten["test/" + key[len("test_") :]] = value
        else:
            rewritten["train/" + key] = value
    return rewritten


def scalar(value: Any) -> float | None:
    """A log value as a float when it is one number (a bool, a string, a list or a non-finite value is not)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def default_logdir() -> str:
    """transformers' (and torch's SummaryWriter's) default run folder: runs/<Mon01_12-00-00>_<host>."""
    current_time = datetime.datetime.now().strftime("%b%d_%H-%M-%S")
    return os.path.join("runs", f"{current_time}_{socket.gethostname()}")


def env_flag(name: str, default: str = "FALSE") -> bool:
    """transformers' reading of a boolean environment variable (ENV_VARS_TRUE_VALUES)."""
    return os.environ.get(name, default).upper() in ("1", "ON", "YES", "TRUE")
