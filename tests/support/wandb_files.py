"""Reads an offline wandb run back from its `.wandb` file (a LevelDB-style log of protobuf records), so tests check
what wandb would upload: the run's group, name, config, history and summary, and its exit code."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wandb.proto import wandb_internal_pb2 as pb

_BLOCK = 32 * 1024
_HEADER = 7  # crc32 (4), length (2), type (1)
_FILE_HEADER = 7  # ":W&B", magic (2), version (1)
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


@dataclass
class OfflineRun:
    path: Path
    group: str = ""
    name: str = ""
    project: str = ""
    tags: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    exit_code: int | None = None


def _records(data: bytes):
    if data[:4] != b":W&B":
        raise ValueError("not a wandb run file")
    position, pending = _FILE_HEADER, b""
    while position + _HEADER <= len(data):
        left_in_block = _BLOCK - position % _BLOCK
        if left_in_block < _HEADER:
            position += left_in_block  # block trailer padding
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + _HEADER])
        payload = data[position + _HEADER : position + _HEADER + length]
        position += _HEADER + length
        if kind == _FULL:
            yield payload
        elif kind == _FIRST:
            pending = payload
        elif kind == _MIDDLE:
            pending += payload
        elif kind == _LAST:
            yield pending + payload
        else:
            break  # zero padding at the end of the file


def read_offline_run(path: str | Path) -> OfflineRun:
    run = OfflineRun(Path(path))
    for payload in _records(Path(path).read_bytes()):
        record = pb.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if (
            kind == "run"
        ):  # a later run record (an update) may leave fields empty: keep what an earlier one said
            run.group = record.run.run_group or run.group
            run.name = record.run.display_name or run.name
            run.project = record.run.project or run.project
            run.tags = list(record.run.tags) or run.tags
            run.config.update({i.key: _config_value(i.value_json) for i in record.run.config.update})
        elif kind == "config":
            run.config.update({i.key: _config_value(i.value_json) for i in record.config.update})
        elif kind == "history":
            run.history.append(
                {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in record.history.item}
            )
        elif kind == "summary":
            run.summary.update(
                {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in record.summary.update}
            )
        elif kind == "exit":
            run.exit_code = record.exit.exit_code
    return run


def offline_runs(folder: str | Path) -> list[OfflineRun]:
    """Every offline run under `<folder>/wandb/`, oldest first."""
    # Folder names carry the start time to the second only (then a random run id): runs started within one second
    # are ordered by when their file was last written, i.e. when each run finished.
    files = sorted(
        Path(folder).glob("wandb/offline-run-*/run-*.wandb"),
        key=lambda f: (f.parent.name.split("-")[2], f.stat().st_mtime_ns),
    )
    return [read_offline_run(f) for f in files]


def _config_value(text: str) -> Any:
    """Config items are stored as {"value": ..., "desc": ...} by some wandb versions and bare by others."""
    value = json.loads(text)
    return (
        value["value"]
        if isinstance(value, dict) and set(value) <= {"value", "desc"} and "value" in value
        else value
    )
