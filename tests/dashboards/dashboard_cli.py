"""The tiny study and run files of the dashboard tests, and the real `hpo` command line that runs them.

Tests import these from here, not from conftest: several test folders have a conftest module, so `from conftest
import ...` would find whichever was imported first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TINY_STUDY = HERE / "tiny_study.yaml"
TINY_RUN = HERE / "tiny_run.yaml"


def hpo(*args: str) -> None:
    """Run the real `hpo` command line; fail the fixture with its output if it fails."""
    result = subprocess.run(
        [sys.executable, "-m", "hpo.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=HERE.parents[1],
    )
    assert result.returncode == 0, (
        f"hpo {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
