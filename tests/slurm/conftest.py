"""The slurm suite: real job arrays on the one-node loopback cluster `.ci/slurm.sh start` runs, with the PostgreSQL
server of the postgres suite. Without a cluster a developer's run skips; a CI run fails."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


@pytest.fixture
def slurm_cluster() -> None:
    """An idle node answers `sinfo`, or the test skips (fails under CI)."""
    problem = None
    if shutil.which("sbatch") is None:
        problem = "sbatch is not on PATH"
    else:
        answer = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30)
        if answer.returncode != 0 or not answer.stdout.strip():
            problem = f"sinfo has no node: {answer.stderr.strip() or 'no answer'}"
    if problem is None:
        return
    message = f"{problem}: start the test cluster with `bash .ci/slurm.sh start` (as root)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
