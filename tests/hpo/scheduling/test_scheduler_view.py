"""The live table: slot rows from the status files the workers and trials write, with an eta from the step rate."""

from __future__ import annotations

import json
import os
import time

import torch
from rich.console import Console

from hpo.scheduling.view import EtaEstimator, read_slot_status, render_table
from hpo.trial.callbacks import SlotStatusCallback, write_status
from trainer import TrainerState


def _render(table) -> str:
    console = Console(width=120, record=True)
    console.print(table)
    return console.export_text()


def test_table_shows_each_slot_with_trial_step_metric_state_and_eta(tmp_path):
    now = time.time()
    base = {"slot": "cpu 0", "trial": 7, "state": "running", "max_steps": 100, "metric": "eval_accuracy"}
    write_status(tmp_path / "slot-0.json", {**base, "step": 10, "value": 0.5, "updated": now - 10})
    write_status(tmp_path / "slot-1.json", {"slot": "cpu 1", "state": "waiting", "updated": now})
    eta = EtaEstimator()
    render_table(read_slot_status(tmp_path), {}, 20, eta)  # first sight of trial 7: step 10
    write_status(tmp_path / "slot-0.json", {**base, "step": 20, "value": 0.8125, "updated": now})
    text = _render(render_table(read_slot_status(tmp_path), {"complete": 3, "running": 1}, 20, eta))
    row = next(line for line in text.splitlines() if "cpu 0" in line)
    assert "7" in row and "20/100" in row and "eval_accuracy=0.8125" in row and "running" in row
    assert "1m20s" in row  # 10 steps in 10 s, 80 steps left
    assert "waiting" in next(line for line in text.splitlines() if "cpu 1" in line)
    assert "slots: trials of 20" in text and "3 complete, 1 running" in text


def test_status_files_being_replaced_are_skipped(tmp_path):
    (tmp_path / "slot-0.json").write_text("{not json")
    write_status(tmp_path / "slot-1.json", {"slot": "cpu 1", "state": "idle"})
    assert [r["slot"] for r in read_slot_status(tmp_path)] == ["cpu 1"]
    assert read_slot_status(tmp_path / "missing") == []


def test_status_in_another_terminal_shows_the_running_slots(tmp_path):
    from types import SimpleNamespace

    from hpo.scheduling.view import print_live_slots, status_dir

    spec = SimpleNamespace(output_dir=str(tmp_path))
    console = Console(width=120, record=True)
    assert print_live_slots(console, spec) is False  # no run in progress
    folder = status_dir(spec)
    folder.mkdir(parents=True)
    write_status(
        folder / "slot-0.json",
        {"slot": "gpu 0", "trial": 3, "state": "running", "step": 5, "max_steps": 50, "updated": time.time()},
    )
    write_status(folder / "slot-1.json", {"slot": "gpu 1", "state": "stopped", "updated": time.time()})
    assert print_live_slots(console, spec, 10) is True
    text = console.export_text()
    assert "gpu 0" in text and "5/50" in text and "gpu 1" not in text
    assert "no trials yet" not in text  # hpo status prints the study's counts itself; no wrong caption here


def test_status_leaves_out_slots_whose_process_died(tmp_path):
    """A run killed outright never marks its slots stopped; hpo status must not show them as running."""
    import subprocess
    import sys
    from types import SimpleNamespace

    from hpo.scheduling.view import print_live_slots, status_dir

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    spec = SimpleNamespace(output_dir=str(tmp_path))
    folder = status_dir(spec)
    folder.mkdir(parents=True)
    fresh = {"state": "running", "step": 5, "max_steps": 50, "updated": time.time()}
    write_status(folder / "slot-0.json", {**fresh, "slot": "cpu 0", "trial": 3, "pid": int(dead.stdout)})
    console = Console(width=120, record=True)
    assert print_live_slots(console, spec, 10) is False
    write_status(folder / "slot-1.json", {**fresh, "slot": "cpu 1", "trial": 4, "pid": os.getpid()})
    assert print_live_slots(console, spec, 10) is True
    text = console.export_text()
    assert "cpu 1" in text and "cpu 0" not in text


def test_gpu_slots_show_the_memory_their_trial_holds_and_why_a_slot_waits(tmp_path):
    now = time.time()
    running = {"slot": "gpu 0", "trial": 4, "state": "running", "step": 3, "max_steps": 30, "updated": now}
    write_status(tmp_path / "slot-0.json", {**running, "gpu_memory": 5 << 30, "gpu_memory_peak": 6 << 30})
    reason = "wait: expects 5.0 GiB, room 1.4 GiB (2.0 GiB free - 0.0 GiB still to grow for 2 running - 0.6 GiB margin)"
    write_status(
        tmp_path / "slot-1.json", {"slot": "gpu 0", "state": "waiting", "note": reason, "updated": now}
    )
    text = _render(render_table(read_slot_status(tmp_path), {}, None, EtaEstimator()))
    lines = text.splitlines()
    assert "gpu memory" in text
    assert "5.0 GiB (peak 6.0)" in next(line for line in lines if "running" in line)
    assert "waiting (wait: expects 5.0 GiB, room 1.4 GiB)" in next(
        line for line in lines if "waiting" in line
    )


def test_cpu_slots_have_no_gpu_memory_column(tmp_path):
    write_status(tmp_path / "slot-0.json", {"slot": "cpu 0", "trial": 1, "state": "running", "step": 1})
    assert "gpu memory" not in _render(render_table(read_slot_status(tmp_path), {}, None, EtaEstimator()))


def test_a_trials_status_record_counts_the_steps_it_took_in_its_own_process(tmp_path):
    # The GPU gate measures a running trial from its second step in its process; a resumed trial starts at step 40.
    path = tmp_path / "slot-0.json"
    callback = SlotStatusCallback(path, None, {"slot": "gpu 0", "trial": 2})
    state = TrainerState(global_step=40, max_steps=100)
    callback.on_train_begin(None, state, None)
    for step in (41, 42):
        state.global_step = step
        callback.on_step_end(None, state, None)
    record = json.loads(path.read_text())
    assert (record["step"], record["steps_run"]) == (42, 2)
    # GPU memory is recorded only by a process that started CUDA (on a GPU machine, an earlier test may have)
    assert ("gpu_memory" in record) == torch.cuda.is_initialized()
