"""Starting worker processes: `python -m hpo.scheduling.worker` with its slot's devices and threads in the
environment; it imports torch and the trial code, then reads its WorkerConfig from stdin.

`hpo run` starts them ahead (`start_workers_ahead`), as soon as it knows the slots, so that their imports (seconds)
overlap with its own and with the dry run; the pool then hands each its configuration (`StartedAhead.take`). This
module stays light (no torch, no Optuna): it is imported before either.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hpo.scheduling.devices import DeviceId
from hpo.scheduling.slots import Slot, make_slots
from hpo.spec.sections import ResourcesSpec


def worker_log_dir(output_dir: str | Path) -> Path:
    return Path(output_dir) / ".hpo" / "logs"


def spawn_worker(slot: Slot, log_dir: Path) -> subprocess.Popen:
    """A worker process for `slot`, writing to log_dir/worker-<slot>.log, waiting for its config on stdin."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log = open(log_dir / f"worker-{slot.index}.log", "ab")  # noqa: SIM115 - the child keeps it
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "hpo.scheduling.worker"],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **slot.environment()},  # before torch loads: its devices and threads
            start_new_session=True,  # Ctrl-C reaches only the scheduler, which asks workers to stop in order
        )
    finally:
        log.close()


class StartedAhead:
    """Worker processes started before the study is ready, by slot; each waits for its configuration. Used as a
    context manager, it ends on the way out the processes no slot took."""

    def __init__(
        self, processes: dict[int, tuple[Slot, subprocess.Popen]], log_dir: Path | None = None
    ) -> None:
        self.processes, self.log_dir = processes, log_dir

    def take(self, slot: Slot, log_dir: Path) -> subprocess.Popen | None:
        """The process started for this slot (same devices and threads, same log folder), or None."""
        started = self.processes.get(slot.index)
        if started is None or started[0].environment() != slot.environment() or self.log_dir != log_dir:
            return None
        del self.processes[slot.index]
        return started[1]

    def discard(self) -> None:
        """End the processes no slot took (the study needed fewer workers, or stopped before its trials)."""
        for _, process in self.processes.values():
            process.kill()
            process.wait()
        self.processes.clear()

    def __enter__(self) -> StartedAhead:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.discard()


def start_workers_ahead(
    resources: ResourcesSpec,
    output_dir: str | Path,
    *,
    workers: int | None = None,
    gpus: Sequence[DeviceId] | None = None,
) -> StartedAhead:
    """Start this machine's workers now, for the slots the pool will make from the same resources and options."""
    log_dir = worker_log_dir(output_dir)
    started = StartedAhead({}, log_dir)
    try:
        for slot in make_slots(resources, gpus=gpus, workers=workers):
            started.processes[slot.index] = (slot, spawn_worker(slot, log_dir))
    except BaseException:
        # A Ctrl-C between two spawns must not leave the first worker behind, importing torch for nobody.
        started.discard()
        raise
    return started
