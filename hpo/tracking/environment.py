"""What a run row records about where it ran: host, command line, package versions, git commit."""

from __future__ import annotations

import functools
import importlib.metadata
import platform
import shlex
import socket
import subprocess
import sys
from pathlib import Path

PACKAGES = (
    "hpo",
    "torch",
    "optuna",
    "transformers",
    "accelerate",
    "deepspeed",
    "wandb",
    "numpy",
    "safetensors",
)


def host() -> str:
    return socket.gethostname()


def command_line() -> str:
    return shlex.join([Path(sys.argv[0]).name if sys.argv else "python", *sys.argv[1:]])


@functools.cache
def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def git_commit(folder: str = ".") -> str | None:
    """HEAD of the git checkout holding `folder` (with "-dirty" when it has uncommitted changes), or None."""
    # Cached by absolute path: "." means another folder after a chdir (a study run from elsewhere in one process).
    return _git_commit(str(Path(folder).resolve()))


@functools.cache
def _git_commit(folder: str) -> str | None:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        changes = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}-dirty" if changes else head or None
