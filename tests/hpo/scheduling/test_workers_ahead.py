"""Workers started ahead (`hpo run` starts them before it checks the study): a Ctrl-C that lands between two spawns
leaves no worker behind (CI once found one still importing torch after `hpo run` had exited 130)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from hpo.scheduling import spawn
from hpo.spec.sections import ResourcesSpec


def test_a_ctrl_c_between_two_spawns_ends_the_worker_already_started(tmp_path: Path, monkeypatch) -> None:
    started = []
    real_spawn = spawn.spawn_worker

    def spawn_then_ctrl_c_on_the_second(slot, log_dir):
        if started:
            os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C: Python raises KeyboardInterrupt here
        process = real_spawn(slot, log_dir)
        started.append(process)
        return process

    monkeypatch.setattr(spawn, "spawn_worker", spawn_then_ctrl_c_on_the_second)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            spawn.start_workers_ahead(ResourcesSpec(), tmp_path, workers=2)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(started) == 1
    assert started[0].returncode is not None  # killed and reaped, not left importing torch
    assert (tmp_path / ".hpo" / "logs" / "worker-0.log").exists()


def test_workers_started_ahead_are_one_per_slot_and_end_with_the_context(tmp_path: Path) -> None:
    with spawn.start_workers_ahead(ResourcesSpec(), tmp_path, workers=2) as ahead:
        processes = [process for _, process in ahead.processes.values()]
        assert sorted(ahead.processes) == [0, 1]
        assert all(process.poll() is None for process in processes)
    assert all(process.returncode is not None for process in processes)
