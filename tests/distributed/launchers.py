"""Finding the launchers the distributed tests start (torchrun, accelerate, deepspeed)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def tool(name: str) -> str:
    """The console script `name` of this Python environment (beside the interpreter, even when its bin folder is not
    on PATH), else the one on PATH."""
    beside = Path(sys.executable).with_name(name)
    if beside.is_file():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} is not installed in this environment ({sys.executable})")
    return found
