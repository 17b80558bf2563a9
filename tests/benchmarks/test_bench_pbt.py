"""bench/pause/pbt.py's own code paths that need no Ray: refusing a --ray-python that does not exist before any contender
runs, and the line that gives Ray's PBT as ratios to ours."""

from __future__ import annotations

import math
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "pause"))

import pbt  # noqa: E402


def test_a_missing_ray_python_is_a_one_line_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-venv" / "bin" / "python"
    done = subprocess.run(
        [sys.executable, str(pbt.ROOT / "bench" / "pause" / "pbt.py"), "--ray-python", str(missing)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--ray-python {missing}: no such file" in lines[0]


def test_ray_is_given_as_ratios_to_our_pbt() -> None:
    args = Namespace(steps=480, workers=2)
    ours = pbt.Result("pbt", 0.14, [[(40, 0.5), (80, 0.18), (120, 0.1)], [(40, 0.6)]], 100.0, members=True)
    ray = pbt.Result("ray_pbt", 0.21, [[(40, 0.5), (80, 0.3), (160, 0.17)], [(40, 0.6)]], 50.0, members=True)
    line = pbt.ray_versus_ours(ray, ours, target=0.18, strict=0.12, args=args)
    # Ray reaches 0.18 at step 160 of 2 members (320 trial-steps), ours at step 80 (160); only ours reaches 0.12.
    assert line == (
        "ray_pbt / pbt: final eval loss 1.50x, trial-steps to 0.1800 2.00x, to 0.1200 never vs 240, wall 0.50x"
    )
    assert math.isinf(ray.steps_to(0.12, 480, 2))
