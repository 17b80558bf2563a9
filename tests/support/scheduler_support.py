"""Helpers for the scheduler tests: slow-enough trials, `hpo run` in a subprocess, and polling the study's storage."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial
from study_task import write_study

from hpo.storage.database import create_storage

MAX_STEPS = 40


def slow_study(folder: Path, *, delay: float = 0.05, **sections: Any) -> Path:
    """A study whose trials take a few seconds (a sleep in each forward) and checkpoint every 4 steps."""
    training = {"max_steps": MAX_STEPS, "save_steps": 4, "eval_steps": 4, "logging_steps": 4}
    resources = {"heartbeat_interval": 1, "grace_period": 3, **sections.pop("resources", {})}
    return write_study(
        folder,
        model={"delay": delay, **sections.pop("model", {})},
        training={**training, **sections.pop("training", {})},
        resources=resources,
        **sections,
    )


def study_url(folder: Path) -> str:
    return f"sqlite:///{folder / 'out' / 'study.db'}"


def trials(folder: Path) -> list[FrozenTrial]:
    path = folder / "out" / "study.db"
    if not path.exists():
        return []
    try:
        study = optuna.load_study(study_name="test", storage=create_storage(study_url(folder)))
    except KeyError:
        return []
    return study.get_trials(deepcopy=False)


def wait_for(condition: Callable[[], Any], timeout: float = 90.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def start_hpo(folder: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`hpo run <folder>/study.yaml ...` in its own process (as a user would start it), `env` added to its
    environment."""
    command = [sys.executable, "-m", "hpo.cli", *(args or ("run",)), str(folder / "study.yaml")]
    if not args or args[0] == "run":
        command += ["--no-dry-run"]
    return subprocess.Popen(
        command,
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
        preexec_fn=ctrl_c_as_in_a_terminal,
    )


def start_machine(folder: Path, url: str, name: str, *args: str) -> subprocess.Popen:
    """`hpo worker` on a shared storage in its own process group, as on another machine (kill it with os.killpg)."""
    command = [sys.executable, "-m", "hpo.cli", "worker", str(folder / "study.yaml"), "--storage", url]
    command += ["--set", f"study.name={name}", *args]
    return subprocess.Popen(
        command,
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        start_new_session=True,
    )


def ctrl_c_as_in_a_terminal() -> None:
    """A shell starting a background job without job control (`pytest ... &` in a script, nohup) sets SIGINT to
    ignored, and Python keeps an ignored SIGINT ignored: the Ctrl-C tests would then see a run that never stops.
    `hpo` is started as from a terminal instead."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def running_trial_with_checkpoint(folder: Path, number: int, step: int) -> FrozenTrial | None:
    """Trial `number` while RUNNING, once its process is known and checkpoint-<step> exists."""
    for trial in trials(folder):
        if trial.number == number and trial.state.name == "RUNNING" and "pid" in trial.user_attrs:
            if (folder / "out" / f"trial-{number}" / f"checkpoint-{step}").is_dir():
                return trial
    return None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def checkpoint_steps(run_dir: Path) -> list[int]:
    return sorted(int(p.name.split("-")[1]) for p in run_dir.glob("checkpoint-*") if p.is_dir())


def kill_quietly(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()


def run_hpo_to_end(folder: Path, *args: str, timeout: float = 300, env: dict[str, str] | None = None) -> str:
    """`hpo ARGS` in `folder` to its end (killed if it outlives `timeout`); asserts exit 0, returns its output."""
    process = start_hpo(folder, *args, env=env)
    try:
        output, _ = process.communicate(timeout=timeout)
    finally:
        kill_quietly(process)
    assert process.returncode == 0, output
    return output
