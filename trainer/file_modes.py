"""Weights files with the mode the user's umask gives every other file.

safetensors 0.8 writes through a temporary file, which is created 0600, and renames it into place
(safetensors/safetensors#782, fix not released). So every model.safetensors and adapter_model.safetensors, in
checkpoints and exports alike, was readable by its owner only, while the JSON files beside it followed the umask: another
account (a serving user, a container's) could not load an exported model.
"""

from __future__ import annotations

import os
from pathlib import Path

WEIGHTS_PATTERN = "*.safetensors"


def current_umask() -> int:
    """The process's umask, read without changing it where Linux reports it (a checkpoint may be published on a
    background thread while another thread creates files)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o077)  # the strictest while it is read: a file created meanwhile is never more open
    os.umask(mask)
    return mask


def follow_umask(folder: str | Path) -> None:
    """Give each weights file under `folder` the mode a new file gets here (0666 less the umask)."""
    mode = 0o666 & ~current_umask()
    for path in Path(folder).rglob(WEIGHTS_PATTERN):
        if path.is_file() and not path.is_symlink():
            os.chmod(path, mode)
