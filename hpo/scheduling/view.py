"""The live terminal table of `hpo run` / `hpo worker`: one row per slot (trial, step, latest metric, state, eta; GPU
memory when a trial runs on a GPU: what its PyTorch reserves now / at most) and the study's counts, read from the slots'
status files (written by the workers and their trials) and the storage. A slot waiting for room on a shared GPU shows
the GPU gate's reason in its state."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState
from rich.console import Console
from rich.table import Table

from hpo.spec import StudySpec
from hpo.storage.pause import is_paused

GiB = 1 << 30


def status_dir(spec: StudySpec) -> Path:
    return Path(spec.output_dir) / ".hpo" / "slots"


def read_slot_status(directory: Path) -> list[dict[str, Any]]:
    """Every slot's latest record, ordered by slot file name."""
    records = []
    for path in sorted(directory.glob("slot-*.json")) if directory.is_dir() else []:
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue  # being replaced right now
    return records


class EtaEstimator:
    """Seconds left for a trial from its step rate since first seen (a resumed trial starts mid-way)."""

    def __init__(self) -> None:
        self.first_seen: dict[tuple[str, Any], tuple[float, int]] = {}

    def eta(self, record: dict[str, Any]) -> float | None:
        step, max_steps = record.get("step"), record.get("max_steps")
        if step is None or not max_steps:
            return None
        key = (record.get("slot"), record.get("trial"))
        now = record.get("updated", time.time())
        first_time, first_step = self.first_seen.setdefault(key, (now, step))
        if step <= first_step or now <= first_time:
            return None
        rate = (step - first_step) / (now - first_time)
        return max(0.0, (max_steps - step) / rate)


def study_counts(study: optuna.Study) -> dict[str, int]:
    """Trials by state; paused trials (ASHA) apart from queued ones, though both are WAITING to Optuna."""
    trials = study.get_trials(deepcopy=False)
    names = ["paused" if is_paused(t) else t.state.name.lower() for t in trials]
    order = [state.name.lower() for state in TrialState] + ["paused"]
    return {name: n for name in order if (n := names.count(name))}


def render_table(
    records: list[dict[str, Any]], counts: dict[str, int] | None, n_trials: int | None, eta: EtaEstimator
) -> Table:
    """`counts` None: no caption (`hpo status` prints the study's counts itself)."""
    total = f" of {n_trials}" if n_trials else ""
    caption = None if counts is None else ", ".join(f"{n} {s}" for s, n in counts.items()) or "no trials yet"
    table = Table(title=f"slots: trials{total}", caption=caption, expand=False)
    gpu = any("gpu_memory" in record for record in records)
    columns = ("slot", "trial", "step", "latest metric", "state", "eta") + (("gpu memory",) if gpu else ())
    for column in columns:
        table.add_column(
            column, justify="right" if column in ("trial", "step", "eta", "gpu memory") else "left"
        )
    for record in records:
        table.add_row(*_row(record, eta), *((_gpu_memory(record),) if gpu else ()))
    return table


def _gpu_memory(record: dict[str, Any]) -> str:
    if record.get("state") not in ("running", "starting") or record.get("gpu_memory") is None:
        return "-"
    now, peak = record["gpu_memory"] / GiB, record.get("gpu_memory_peak", record["gpu_memory"]) / GiB
    return f"{now:.1f} GiB (peak {peak:.1f})"


def _row(record: dict[str, Any], eta: EtaEstimator) -> list[str]:
    running = record.get("state") in ("running", "starting")
    step = record.get("step")
    max_steps = record.get("max_steps")
    step_text = f"{step}/{max_steps}" if running and step is not None else "-"
    metric = f"{record['metric']}={record['value']:.4g}" if running and "value" in record else "-"
    seconds = eta.eta(record) if running else None
    return [
        str(record.get("slot", "?")),
        str(record.get("trial", "-")) if running else "-",
        step_text,
        metric,
        str(record.get("state", "?")) + (f" ({record['note'].split(' (')[0]})" if record.get("note") else ""),
        _duration(seconds),
    ]


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _alive(pid: Any) -> bool:
    """Whether the process that wrote a slot record still runs (records without a pid count as alive). A run killed
    outright (a second Ctrl-C, SIGKILL) never writes "stopped": its dead writers show it ended."""
    if pid is None:
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, OverflowError):
        return True
    return True


def print_live_slots(
    console: Console, spec: StudySpec, n_trials: int | None = None, fresh_s: float = 120.0
) -> bool:
    """For `hpo status` in another terminal: the slots table of a run in progress on this machine, if there is one.
    Returns whether it printed. Records older than `fresh_s` (a run that ended or died) are left out."""
    now = time.time()
    records = [
        r
        for r in read_slot_status(status_dir(spec))
        if r.get("state") != "stopped" and now - float(r.get("updated", 0)) < fresh_s and _alive(r.get("pid"))
    ]
    if not records:
        return False
    console.print(render_table(records, None, n_trials, EtaEstimator()))
    return True
