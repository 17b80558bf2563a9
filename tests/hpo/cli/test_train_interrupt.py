"""Ctrl-C of `hpo train`: the first one saves a checkpoint at the next step and stops, the second stops at once. Either
way the last thing printed is what was saved and the command that continues (no progress bar line after it), the exit
code is 130, nothing is left running or in the temp folder, and the printed command resumes the run."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from scheduler_support import ctrl_c_as_in_a_terminal, kill_quietly, wait_for
from study_task import write_study


def _run_file(folder: Path, callbacks: list[dict] | None = None) -> Path:
    study = yaml.safe_load(write_study(folder).read_text())
    run = {
        "name": "stop",
        "output_dir": str(folder / "run"),
        "task": study["task"],
        "model": {"delay": 0.05},
        "training": {**study["training"], "max_steps": 400, "disable_tqdm": False},
        "tracking": {"store": False},
        "callbacks": callbacks or [],
    }
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump(run))
    return path


def _start(folder: Path, temp: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "hpo.cli", *args],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(temp)},
        preexec_fn=ctrl_c_as_in_a_terminal,
    )


def _last_line(output: str) -> str:
    return [line for line in re.split(r"[\r\n]", output) if line.strip()][-1]


def _started_run(folder: Path, callbacks: list[dict] | None = None):
    temp = folder / "tmp"
    temp.mkdir()
    path = _run_file(folder, callbacks)
    run = _start(folder, temp, "train", str(path))
    try:
        wait_for(lambda: (folder / "run" / "checkpoint-4").is_dir(), what="checkpoint-4")
    except AssertionError:
        kill_quietly(run)
        raise
    yield folder, temp, path, run
    kill_quietly(run)


@pytest.fixture
def started(tmp_path: Path):
    yield from _started_run(tmp_path)


@pytest.fixture
def started_with_slow_saves(tmp_path: Path):
    """Each save takes a second more: the stop a first Ctrl-C starts (a checkpoint at the next step) is still going on
    when a second Ctrl-C comes 50 ms later, however soon the step ended (else the two would race)."""
    yield from _started_run(tmp_path, [{"import": "study_task:SlowSave", "args": {"seconds": 1.0}}])


def _stop(run: subprocess.Popen, times: int) -> str:
    for _ in range(times):
        run.send_signal(signal.SIGINT)
        time.sleep(0.05)
    output, _ = run.communicate(timeout=60)
    return output


@pytest.mark.slow
def test_ctrl_c_saves_a_checkpoint_says_so_last_and_the_printed_command_resumes(started):
    folder, temp, path, run = started
    output = _stop(run, 1)
    assert run.returncode == 130, output
    last = _last_line(output)
    match = re.fullmatch(r"stopped at step (\d+): saved (\S+); continue with: (.+)", last)
    assert match, output[-2000:]
    step, saved, command = int(match[1]), Path(match[2]), match[3]
    assert saved == folder / "run" / f"checkpoint-{step}" and saved.is_dir()
    assert command == f"hpo train {path} --resume"
    assert "error" not in output.lower() and "Traceback" not in output
    assert sorted(temp.iterdir()) == []

    resumed = _start(folder, temp, *shlex.split(command)[1:], "--set", "model.delay=0.0")
    output, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, output
    metrics = json.loads((folder / "run" / "metrics.json").read_text())
    assert metrics["resumed_from"] == str(saved) and metrics["global_step"] == 400


@pytest.mark.slow
def test_a_second_ctrl_c_stops_at_once_and_names_the_newest_checkpoint(started_with_slow_saves):
    folder, temp, path, run = started_with_slow_saves
    output = _stop(run, 2)
    assert run.returncode == 130, output
    last = _last_line(output)
    match = re.fullmatch(
        r"stopped at once: the newest checkpoint is (\S+) \(step (\d+)\); continue with: (.+)", last
    )
    assert match, output[-2000:]
    assert Path(match[1]).is_dir() and match[3] == f"hpo train {path} --resume"
    assert sorted(temp.iterdir()) == []
