"""Every benchmark command still runs: each script under bench/ that has a `__main__` answers `--help` (so its imports
and its argument parser hold after a move), and the GPU checks script's dry run validates every study file and
argument it would use on a GPU. A script that needs a peer's package this venv does not hold (Ray, Syne Tune, SMAC,
DEHB: the bench venvs) is skipped with the package named; any other import error fails."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
# Packages only the bench venvs hold (docs/benchmarks.md says which venv): a script that needs one is skipped here.
PEER_PACKAGES = {"ray", "syne_tune", "smac", "dehb", "ConfigSpace", "optuna_dashboard"}
MISSING = re.compile(r"No module named '([\w.]+)'")


def entry_points() -> list[Path]:
    return sorted(
        path
        for path in BENCH.rglob("*.py")
        if 'if __name__ == "__main__":' in path.read_text(encoding="utf-8")
    )


def test_every_benchmark_folder_has_entry_points_and_a_readme() -> None:
    folders = {path.parent for path in entry_points()}
    assert {BENCH / name for name in ("peers", "pause", "overhead", "gpu", "search")} <= folders
    assert [path.name for path in BENCH.glob("*.py")] == ["common.py"], (
        "a benchmark lives in a folder by concern"
    )
    for folder in folders:
        assert (folder / "README.md").is_file(), f"{folder.relative_to(ROOT)} has no README.md"
    assert (BENCH / "README.md").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("script", entry_points(), ids=lambda path: str(path.relative_to(BENCH)))
def test_the_entry_point_answers_help(script: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(script), "--help"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    missing = MISSING.search(done.stderr)
    if done.returncode != 0 and missing and missing.group(1).split(".")[0] in PEER_PACKAGES:
        pytest.skip(f"needs {missing.group(1)} (a bench venv's package)")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage: " in done.stdout, done.stdout[:300]


@pytest.mark.slow
def test_the_gpu_checks_dry_run_validates_every_part_without_a_gpu(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(BENCH / "gpu" / "checks.sh")],
        cwd=ROOT,
        env={**os.environ, "GPU_CHECKS_DRY": "1", "GPU_CHECKS_PYTHON": sys.executable, "OUT": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for part in ("packing", "oom", "strategies", "tests-gpu"):
        assert f"== {part}: exit 0" in done.stdout, done.stdout
    assert "refused" not in (tmp_path / "packing.log").read_text()
