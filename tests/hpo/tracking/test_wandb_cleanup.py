"""A study with wandb leaves nothing behind in the system temp folder: wandb creates `tmp*wandb-media` and
`tmp*wandb-artifacts` at import and removes them at interpreter exit, which a forked trial process (it leaves by
`os._exit`) skips unless the trial's exit path cleans up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from study_task import write_study


@pytest.mark.slow  # 12 s on 2 cores: run by .ci/run's slow suite
def test_a_wandb_study_leaves_no_temp_folders(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    path = write_study(
        tmp_path / "study",
        study={"n_trials": 2, "pruner": {"type": "none"}},
        training={"max_steps": 4},
        tracking={"store": False, "wandb": {"project": "cleanup-test"}},
    )
    env = {**os.environ, "TMPDIR": str(temp), "WANDB_MODE": "offline", "OMP_NUM_THREADS": "1"}
    env.pop("WANDB_API_KEY", None)
    done = subprocess.run(
        [sys.executable, "-m", "hpo.cli", "run", str(path), "--no-dry-run"],
        cwd=path.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 complete" in done.stdout
    assert sorted(p.name for p in temp.iterdir()) == []
