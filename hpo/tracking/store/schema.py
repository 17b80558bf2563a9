"""The experiment store's schema: tables, columns and indexes, how rows are encoded, and what a run id is.

Schema (JSON columns hold JSON text on both backends; times are unix seconds):

    hpo_runs       one row per `hpo train` run or study trial
        id TEXT PRIMARY KEY     "<study>/trial-<number>" for a trial, "run/<name>-<unix time>" for a single run
        kind TEXT               "trial" | "run"
        study_name TEXT, trial_number INTEGER, name TEXT
        status TEXT             running | completed | pruned | failed | interrupted
        params JSON             the sampled hyperparameters (or the run file's `model:` dict)
        arguments JSON          TrainingArguments.to_dict()
        state JSON              the final TrainerState (global_step, best_metric, best_global_step, ...; no log_history)
        started_at REAL, ended_at REAL, host TEXT, slot TEXT, devices TEXT
        command TEXT            the command line of the process
        packages JSON           versions of torch, optuna, transformers, ... and hpo
        git_commit TEXT         commit of the working folder, when it is a git checkout
        output_dir TEXT, objective REAL (first objective value), extra JSON (values, best_step, error, ...)
        peak_gpu_memory INTEGER  bytes PyTorch's allocator reserved at most on the GPU during training (None on CPU)
        peak_rss INTEGER         the training process's peak resident memory in bytes
        trainable_params INTEGER parameters the optimizer trained (an adapter's only, under peft:)
        checkpoint_bytes INTEGER size on disk of the run's best (else newest) checkpoint folder
    hpo_metrics    one row per number in every Trainer log record
        run_id TEXT, step INTEGER (global step), epoch REAL, name TEXT, value REAL, time REAL
    hpo_events     run_id TEXT, time REAL, kind TEXT, message TEXT, data JSON
        kinds: started, evaluated, pruned, failed, retried, resumed, interrupted, completed, out_of_memory (a trial
        that ran out of GPU memory while sharing its GPU: queued again, run status "requeued"), paused (an ASHA trial
        stopped at a rung with a checkpoint, run status "paused" until it is promoted or ends)
    hpo_artifacts  run_id TEXT, kind TEXT ("checkpoint" | "export"), path TEXT, sha256 TEXT, size INTEGER, step INTEGER,
                   time REAL.  For a folder, sha256 is the digest of its sorted "relative-path sha256-of-file" lines and
                   size is the sum of its files' sizes (see `hpo.tracking.digest`).
"""

from __future__ import annotations

import json
from typing import Any

JSON = "json"

TABLES: dict[str, dict[str, Any]] = {
    "hpo_runs": {
        "id": str,
        "kind": str,
        "study_name": str,
        "trial_number": int,
        "name": str,
        "status": str,
        "params": JSON,
        "arguments": JSON,
        "state": JSON,
        "started_at": float,
        "ended_at": float,
        "host": str,
        "slot": str,
        "devices": str,
        "command": str,
        "packages": JSON,
        "git_commit": str,
        "output_dir": str,
        "objective": float,
        "extra": JSON,
        "peak_gpu_memory": int,
        "peak_rss": int,
        "trainable_params": int,
        "checkpoint_bytes": int,
    },
    "hpo_metrics": {"run_id": str, "step": int, "epoch": float, "name": str, "value": float, "time": float},
    "hpo_events": {"run_id": str, "time": float, "kind": str, "message": str, "data": JSON},
    "hpo_artifacts": {
        "run_id": str,
        "kind": str,
        "path": str,
        "sha256": str,
        "size": int,
        "step": int,
        "time": float,
    },
}
# Columns added after a store may have been created: opening an older store adds them (ALTER TABLE ... ADD COLUMN).
ADDED_COLUMNS: dict[str, list[str]] = {
    "hpo_runs": ["peak_gpu_memory", "peak_rss", "trainable_params", "checkpoint_bytes"]
}
# Indexes that make the dashboard's and export's lookups cheap.
INDEXES: dict[str, list[list[str]]] = {
    "hpo_runs": [["study_name", "trial_number"]],
    "hpo_metrics": [["run_id", "name", "step"]],
    "hpo_events": [["run_id", "time"], ["kind"]],
    "hpo_artifacts": [["run_id", "kind"]],
}
EVENT_KINDS = (
    "started",
    "evaluated",
    "pruned",
    "failed",
    "retried",
    "resumed",
    "interrupted",
    "completed",
    "out_of_memory",
    "paused",
)
# An event of one of these kinds also sets the run's status.
TERMINAL_STATUS = {
    "completed": "completed",
    "pruned": "pruned",
    "failed": "failed",
    "interrupted": "interrupted",
    "out_of_memory": "requeued",
    "paused": "paused",
}


def encode_row(table: str, row: dict[str, Any]) -> dict[str, Any]:
    """Keep only the table's columns; JSON columns become JSON text; numbers get their column's type."""
    columns = TABLES[table]
    unknown = set(row) - set(columns)
    if unknown:
        raise ValueError(f"{table} has no column(s) {sorted(unknown)}; columns are {list(columns)}")
    encoded = {}
    for name, value in row.items():
        kind = columns[name]
        if value is None:
            encoded[name] = None
        elif kind == JSON:
            encoded[name] = json.dumps(value, default=str, sort_keys=True)
        else:
            encoded[name] = kind(value)
    return encoded


def decode_row(table: str, row: dict[str, Any]) -> dict[str, Any]:
    columns = TABLES[table]
    return {
        name: (json.loads(value) if columns.get(name) == JSON and isinstance(value, str) else value)
        for name, value in row.items()
    }


def trial_run_id(study_name: str | None, trial_number: int | None) -> str:
    """The run id of a study's trial: "<study>/trial-<number>"."""
    return f"{study_name}/trial-{trial_number}"


def parse_run_id(run_id: str) -> dict[str, Any]:
    """kind, study_name and trial_number implied by a run id ("<study>/trial-<n>" or "run/<name>-<time>")."""
    head, _, tail = run_id.rpartition("/")
    if tail.startswith("trial-") and tail[6:].isdigit() and head:
        return {"kind": "trial", "study_name": head, "trial_number": int(tail[6:])}
    if head == "run":
        return {"kind": "run"}
    return {}
