"""What several benchmarks share: the project's root, how to call `hpo`, a child's environment, a timed command.

A benchmark script runs as `python bench/<folder>/<script>.py`; it puts the project's root first on sys.path and imports
this module as `bench.common`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def hpo_command() -> list[str]:
    """`hpo` as this environment installed it, or the module where no console script was installed (a GPU image)."""
    script = Path(sys.executable).with_name("hpo")
    return [str(script)] if script.exists() else [sys.executable, "-m", "hpo.cli"]


def child_environment() -> dict[str, str]:
    """A child that imports the project from this checkout and never waits on wandb's servers."""
    return {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "offline", "WANDB_SILENT": "true"}


def timed(command: list[str]) -> float:
    """Wall seconds of a command run from the project's root; a failure raises with the last line it printed."""
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=child_environment(), capture_output=True, text=True)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["(no output)"]
        errors = [line for line in lines if "Error" in line]  # the exception, not the wrapper's last word
        raise RuntimeError(f"exit {done.returncode}: {(errors or lines)[-1]}")
    return time.perf_counter() - started


def load_average() -> float:
    """The 1-minute load average: other work on the machine slows every figure beside it."""
    return round(os.getloadavg()[0], 1)
