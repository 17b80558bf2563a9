"""An output folder given as an fsspec URL (`s3://bucket/prefix`, `file:///shared/runs`): the local folder that stands
for it.

Trials, the Trainer and every command work on local paths. So a URL output folder becomes a local *mirror*, a scratch
folder on this machine (`$HPO_SCRATCH`, else `$TMPDIR` or /tmp, then `hpo-mirror-<hash of the URL>`), and the mirror
records its URL in `.hpo-remote`. hpo.storage.remote uploads each complete checkpoint from the mirror and fetches the
ones another machine wrote. Paths recorded in the storage by another machine name that machine's mirror; the folder name
`hpo-mirror-<hash>` is the same everywhere, so the part after it locates the same object on any machine.

Only the name mapping lives here (no fsspec import): spec loading runs before anything heavy.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

REMOTE_FILE = ".hpo-remote"
MIRROR_PREFIX = "hpo-mirror-"
SCRATCH_VARIABLE = "HPO_SCRATCH"
# A scheme of two or more letters: `c:/x` (a Windows drive) is a path, `s3://b/p` and `file:///x` are URLs.
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]+://")


def is_url(value: str | Path | None) -> bool:
    return isinstance(value, str) and _URL.match(value) is not None


def normalize(url: str) -> str:
    """One spelling per location: no trailing slash (the hash of the URL names the mirror)."""
    return url.rstrip("/") if not url.endswith(":///") else url


def mirror_name(url: str) -> str:
    return MIRROR_PREFIX + hashlib.sha256(normalize(url).encode()).hexdigest()[:16]


def scratch_root() -> Path:
    """Where this machine (or this SLURM task) keeps its mirrors: node-local disk."""
    root = os.environ.get(SCRATCH_VARIABLE) or os.path.join(tempfile.gettempdir(), "hpo-scratch")
    return Path(root).expanduser().absolute()


def mirror_dir(url: str) -> Path:
    """The local folder standing for `url`, created with its `.hpo-remote` file (so code holding only the local
    folder finds the URL)."""
    folder = scratch_root() / mirror_name(url)
    record = folder / REMOTE_FILE
    if not record.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        temporary = record.with_name(f"{REMOTE_FILE}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps({"url": normalize(url)}))
        temporary.replace(record)
    return folder


def remote_url(folder: str | Path) -> str | None:
    """The URL a mirror folder stands for, or None for a plain local folder."""
    try:
        return str(json.loads((Path(folder) / REMOTE_FILE).read_text())["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
