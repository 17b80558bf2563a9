"""The commands that only read a study (`hpo status`, `hpo best`) answer without importing torch: its import took
2.1-2.6 s of `hpo status`'s 4.3 s on a quiet machine (1.7 s without it), and a user watching a study runs it often."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scheduler_support import run_hpo_to_end, slow_study

# Runs a command as `hpo` does, then says which of the heavy libraries it loaded.
PROBE = """
import json, runpy, sys
sys.argv, code = ["hpo", *sys.argv[1:]], 0
try:
    runpy.run_module("hpo.cli", run_name="__main__")
except SystemExit as stop:
    code = stop.code
print(json.dumps({"exit": code, "torch": "torch" in sys.modules}))
"""


@pytest.fixture(scope="module")
def finished_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("study")
    slow_study(folder, delay=0.0, study={"n_trials": 1})
    run_hpo_to_end(folder, "run")
    return folder


@pytest.mark.parametrize(("command", "shown"), [("status", "1 complete"), ("best", "eval_accuracy")])
def test_a_reading_command_answers_without_importing_torch(
    finished_study: Path, command: str, shown: str
) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*sys.path, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, command, str(finished_study / "study.yaml")],
        cwd=finished_study,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    *output, probe = done.stdout.strip().splitlines()
    assert json.loads(probe) == {"exit": 0, "torch": False}, done.stdout + done.stderr
    assert shown in "\n".join(output)
