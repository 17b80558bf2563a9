"""Checkpoint folders by name: where step N's checkpoint lives, which folders are complete, the newest, their size.

Apart from trainer.checkpoint (which writes and reads them, with torch): the commands that only look at a study's
folders (`hpo status`, `hpo best`, retention) do not pay torch's import (3 s).
"""

from __future__ import annotations

import re
from pathlib import Path

PREFIX = "checkpoint"
STATE_FILE = "trainer_state.json"
ARGS_FILE = "training_args.json"
_NAME = re.compile(rf"^{PREFIX}-(\d+)$")


def checkpoint_dir(output_dir: str | Path, step: int) -> Path:
    return Path(output_dir) / f"{PREFIX}-{step}"


def is_complete(path: Path) -> bool:
    return path.is_dir() and _NAME.match(path.name) is not None and (path / STATE_FILE).is_file()


def list_checkpoints(output_dir: str | Path) -> list[Path]:
    """Complete checkpoints under output_dir, oldest (lowest step) first."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if is_complete(p)]
    return sorted(found, key=lambda p: int(_NAME.match(p.name).group(1)))


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    found = list_checkpoints(output_dir)
    return found[-1] if found else None


def folder_bytes(path: str | Path) -> int:
    """The bytes of every file under a checkpoint (or any) folder: what it costs on disk."""
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())
