"""Names that become folder names: `study.name` (runs/<name>/), a run file's `name` (runs/<name>/).

A name is one path component, so the folder it names is always where the file says: `../x`, `/etc`, `a/../../b` or a
NUL byte would put (or, with rotation and retention, delete) files outside the output folder. A file that wants its
study somewhere else says so with `output_dir`, which is a path on purpose.
"""

from __future__ import annotations

import os
from pathlib import Path

# The characters a path component cannot hold on some system the study may run on (both separators, NUL), and the
# two names every folder already holds.
_SEPARATORS = ("/", "\\", "\0")
_RESERVED = (".", "..")


def check_plain_name(value: str, *, output_field: str) -> str:
    """`value`, if it can be a single folder name; else a ValueError naming the problem and the fix.
    `output_field` is the field that places the output elsewhere (study.output_dir, output_dir)."""
    problem = _name_problem(value)
    if problem is None:
        return value
    raise ValueError(
        f"{value!r} {problem}; the name becomes the folder runs/<name>, so it must be one plain name (letters, "
        f"digits, - _ .), e.g. {_suggestion(value)!r}; to put the output elsewhere set {output_field}"
    )


def _name_problem(value: str) -> str | None:
    if not value.strip():
        return "is empty"
    if "\0" in value:
        return "holds a NUL byte"
    if any(sep in value for sep in _SEPARATORS) or (os.altsep and os.altsep in value):
        return "holds a path separator"
    if value in _RESERVED:
        return "is a folder's own name for itself or its parent"
    if Path(value).is_absolute():
        return "is an absolute path"
    return None


def _suggestion(value: str) -> str:
    """The name with every unsafe part replaced: `../x` -> `x`, `a/b` -> `a-b`."""
    parts = [
        part for part in value.replace("\\", "/").replace("\0", "").split("/") if part not in ("", *_RESERVED)
    ]
    return "-".join(parts) or "my-study"
