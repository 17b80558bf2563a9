"""`hpo train --resume` from a checkpoint holding a pickle that runs code: exit 2, one line naming the file, and the
pickle never runs (the crafted file would write a marker)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import yaml

from hpo.cli import main

TASK = {
    "model_init": "studies.tasks.digits:model_init",
    "data": "studies.tasks.digits:data",
    "compute_metrics": "studies.tasks.digits:compute_metrics",
}


class WritesMarker:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def run_main(*args: str) -> int:
    with pytest.raises(SystemExit) as stop:
        main(list(args))
    return stop.value.code


@pytest.mark.parametrize("name", ["optimizer.pt", "rng_state.pth"])
def test_resume_refuses_a_checkpoint_whose_pickle_runs_code(tmp_path, capsys, name):
    run = tmp_path / "run.yaml"
    training = {"max_steps": 2, "save_strategy": "steps", "save_steps": 2, "disable_tqdm": True}
    run.write_text(yaml.safe_dump({"task": TASK, "training": training, "tracking": {"store": False}}))
    out = tmp_path / "out"
    assert run_main("train", str(run), "--output-dir", str(out)) == 0
    checkpoint = out / "checkpoint-2"
    marker = tmp_path / "PWNED"
    torch.save({"state": WritesMarker(marker)}, checkpoint / name)
    capsys.readouterr()
    code = run_main("train", str(run), "--output-dir", str(out), "--set", "training.max_steps=4", "--resume")
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith(
        f"error: --resume: {checkpoint / name}: refused: loading it would call posix.system"
    ), err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not marker.exists()
