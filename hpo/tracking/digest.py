"""sha256 and size of an artifact: a file, or a folder such as a checkpoint."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def digest_path(path: str | Path) -> dict[str, Any]:
    """{"sha256", "size"} of a file; for a folder, the digest of its sorted "relative-path file-sha256" lines and the
    sum of its files' sizes, so two checkpoints with the same files and bytes have the same digest."""
    path = Path(path)
    if path.is_file():
        return {"sha256": file_sha256(path), "size": path.stat().st_size}
    if not path.is_dir():
        raise FileNotFoundError(f"artifact {path} does not exist")
    lines, size = [], 0
    for item in sorted(p for p in path.rglob("*") if p.is_file()):
        lines.append(f"{item.relative_to(path).as_posix()} {file_sha256(item)}\n")
        size += item.stat().st_size
    return {"sha256": hashlib.sha256("".join(lines).encode()).hexdigest(), "size": size}
