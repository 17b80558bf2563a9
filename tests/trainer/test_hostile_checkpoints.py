"""A checkpoint folder holding a pickle that runs code (a `__reduce__` in optimizer.pt, rng_state.pth, scheduler.pt or a
pytorch_model.bin instead of model.safetensors) is refused by name when training resumes from it, and the code never
runs: the crafted files here would write a marker file, and the marker is never written."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import pytest
import torch
from trainer_tasks import Regression, make_model, quiet_args

from trainer import Trainer
from trainer.errors import CheckpointError
from trainer.safe_load import DEEPSPEED_GLOBALS, check_pickles, load_torch_file


class WritesMarker:
    """Unpickling this calls os.system: the shape of every pickle exploit."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """A real checkpoint (step 4 of 8) to tamper with; each test works on a copy."""
    out = tmp_path_factory.mktemp("saved")
    args = quiet_args(out, max_steps=4, save_strategy="steps", save_steps=4, warmup_steps=1)
    Trainer(model=make_model(), args=args, train_dataset=Regression(32)).train()
    return out / "checkpoint-4"


def tampered(saved: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "run" / "checkpoint-4"
    shutil.copytree(saved, folder)
    return folder


def resume(folder: Path) -> None:
    args = quiet_args(folder.parent, max_steps=8, save_strategy="no")
    Trainer(model=make_model(), args=args, train_dataset=Regression(32)).train(
        resume_from_checkpoint=str(folder)
    )


@pytest.mark.parametrize("name", ["optimizer.pt", "rng_state.pth", "scheduler.pt"])
def test_a_trainer_pickle_that_runs_code_is_refused_and_never_run(saved, tmp_path, name):
    folder = tampered(saved, tmp_path)
    marker = tmp_path / "PWNED"
    torch.save({"state": WritesMarker(marker)}, folder / name)
    with pytest.raises(CheckpointError) as caught:
        resume(folder)
    message = str(caught.value)
    assert message.startswith(f"{folder / name}: refused: loading it would call posix.system"), message
    assert "\n" not in message
    assert not marker.exists()


def test_a_bare_pickle_is_refused(saved, tmp_path):
    folder = tampered(saved, tmp_path)
    marker = tmp_path / "PWNED"
    (folder / "optimizer.pt").write_bytes(pickle.dumps(WritesMarker(marker)))
    with pytest.raises(CheckpointError, match=r"optimizer\.pt: refused: not a file torch\.save wrote"):
        resume(folder)
    assert not marker.exists()


def test_pytorch_model_bin_instead_of_safetensors_is_refused_and_never_loaded(saved, tmp_path):
    folder = tampered(saved, tmp_path)
    marker = tmp_path / "PWNED"
    weights = torch.load(
        folder / "optimizer.pt", weights_only=True
    )  # any tensors: the file's shape is what matters
    (folder / "model.safetensors").unlink()
    torch.save({"weights": weights, "payload": WritesMarker(marker)}, folder / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match=r"pytorch_model\.bin: refused"):
        resume(folder)
    assert not marker.exists()


def test_a_plain_tensor_bin_is_never_a_substitute_for_safetensors(saved, tmp_path):
    folder = tampered(saved, tmp_path)
    state = make_model().state_dict()
    (folder / "model.safetensors").unlink()
    torch.save(state, folder / "pytorch_model.bin")  # harmless, and still not read: safetensors only
    with pytest.raises(CheckpointError) as caught:
        resume(folder)
    message = str(caught.value)
    assert message.startswith(f"{folder}: no model.safetensors; pytorch_model.bin is a pickle"), message


def test_every_load_of_a_torch_file_is_weights_only(tmp_path):
    """load_torch_file refuses by name even when a caller skips the folder check."""
    marker = tmp_path / "PWNED"
    torch.save(WritesMarker(marker), tmp_path / "scaler.pt")
    with pytest.raises(CheckpointError, match=r"scaler\.pt: refused: it holds pickled objects"):
        load_torch_file(tmp_path / "scaler.pt")
    assert not marker.exists()


def test_the_checkpoints_this_trainer_writes_pass_the_check(saved):
    check_pickles(saved)
    assert all(name.startswith("deepspeed.") and "." in name for name in DEEPSPEED_GLOBALS)


def test_no_torch_load_in_the_code_base_runs_pickled_code():
    """Every torch.load outside the tests and benchmarks passes weights_only=True (one place: trainer.safe_load)."""
    root = Path(__file__).resolve().parents[2]
    offenders = []
    for package in ("trainer", "hpo", "dashboards", "studies"):
        for path in (root / package).rglob("*.py"):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if (
                    "torch.load(" in line
                    and "weights_only=True" not in line
                    and not line.lstrip().startswith(("#", '"'))
                ):
                    offenders.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    assert not offenders, offenders
