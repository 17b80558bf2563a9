"""`hpo export` against hostile folders: an --out folder that is someone's (other files, a file, an export.json that is
not ours) is refused in one line naming it and the fix, and left as it was; a checkpoint holding a pickle instead of
safetensors weights is refused by name, and the pickle never runs; so is an export folder given to load_exported."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from study_task import write_study

from hpo import load_exported
from hpo.cli import main
from hpo.errors import ConfigError


class WritesMarker:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture(scope="module")
def study_file(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("export-hostile")
    path = write_study(folder, study={"n_trials": 2, "keep_checkpoints": {"top_k": None}})
    with pytest.raises(SystemExit) as stopped:
        main(["run", str(path), "--in-process", "--no-dry-run"])
    assert stopped.value.code == 0
    return path


def _cli(args: list[str], capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    return exit_info.value.code, capsys.readouterr().err.strip()


def _export(study_file: Path, out: Path | str, capsys, trial: int = 0) -> tuple[int, str]:
    return _cli(["export", str(study_file), "--out", str(out), "--trial", str(trial), "--no-eval"], capsys)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    "contents",
    [
        {"notes.txt": "my thesis"},
        {"export.json": '{"name": "a web project", "version": "1.0.0"}', "index.js": "x"},
        {"export.json": "not json at all", "data.csv": "1,2"},
    ],
)
def test_a_folder_that_is_not_an_earlier_export_is_refused_and_left_alone(
    study_file, tmp_path, capsys, contents
):
    out = tmp_path / "mine"
    out.mkdir()
    for name, text in contents.items():
        (out / name).write_text(text)
    before = _snapshot(out)
    code, err = _export(study_file, out, capsys)
    assert code == 2
    assert err == (
        f"error: --out {out}: {out} holds files and is not an earlier hpo export (no export.json of ours), so it is "
        "not replaced; give another --out, or delete the folder"
    )
    assert _snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # no staging folder left beside it


def test_a_file_at_out_is_refused(study_file, tmp_path, capsys):
    out = tmp_path / "model"
    out.write_text("keep me")
    code, err = _export(study_file, out, capsys)
    assert code == 2 and "is a file" in err and len(err.splitlines()) == 1, err  # click's own check of --out
    assert out.read_text() == "keep me"


def test_an_empty_folder_and_an_earlier_export_are_written(study_file, tmp_path, capsys):
    out = tmp_path / "empty"
    out.mkdir()
    assert _export(study_file, out, capsys)[0] == 0
    assert _export(study_file, out, capsys, trial=1)[0] == 0  # an earlier export: replaced as a whole
    assert json.loads((out / "export.json").read_text())["trial_number"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]


def test_an_export_folder_with_a_pickle_instead_of_safetensors_is_not_loaded(study_file, tmp_path, capsys):
    out = tmp_path / "export"
    assert _export(study_file, out, capsys)[0] == 0
    marker = tmp_path / "PWNED"
    (out / "model.safetensors").unlink()
    torch.save({"payload": WritesMarker(marker)}, out / "pytorch_model.bin")
    with pytest.raises(ConfigError) as caught:
        load_exported(out)
    assert str(caught.value).startswith(f"{out}: no model.safetensors; pytorch_model.bin is a pickle")
    assert not marker.exists()


def test_a_checkpoint_with_a_pickle_instead_of_safetensors_is_refused_by_name(tmp_path, capsys):
    path = write_study(tmp_path / "study", study={"n_trials": 1, "keep_checkpoints": {"top_k": None}})
    assert _cli(["run", str(path), "--in-process", "--no-dry-run"], capsys)[0] == 0
    marker = tmp_path / "PWNED"
    for folder in (tmp_path / "study" / "out" / "trial-0").glob("checkpoint-*"):
        (folder / "model.safetensors").unlink()
        torch.save({"payload": WritesMarker(marker)}, folder / "pytorch_model.bin")
    code, err = _export(path, tmp_path / "e", capsys)
    assert code == 2, err
    assert "pytorch_model.bin is a pickle, and weights are read from safetensors only" in err
    assert len(err.splitlines()) == 1 and not marker.exists() and not (tmp_path / "e").exists()


def test_a_damaged_weights_file_is_named_in_one_line(tmp_path, capsys):
    """A model.safetensors cut short after it was written (found by tests/chaos/campaign.py: a full disk, a truncated copy)."""
    path = write_study(tmp_path / "study", study={"n_trials": 1, "keep_checkpoints": {"top_k": None}})
    assert _cli(["run", str(path), "--in-process", "--no-dry-run"], capsys)[0] == 0
    for weights in (tmp_path / "study" / "out" / "trial-0").glob("checkpoint-*/model.safetensors"):
        weights.write_bytes(weights.read_bytes()[:100])
    code, err = _export(path, tmp_path / "e", capsys)
    assert code == 1, err
    assert "model.safetensors: not a readable safetensors file (" in err and "export another trial" in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err and not (tmp_path / "e").exists()


def test_a_damaged_trainer_state_is_named_in_one_line(tmp_path, capsys):
    """A checkpoint's trainer_state.json cut short (found by tests/chaos/campaign.py: export ended in a raw JSONDecodeError)."""
    path = write_study(tmp_path / "study", study={"n_trials": 1, "keep_checkpoints": {"top_k": None}})
    assert _cli(["run", str(path), "--in-process", "--no-dry-run"], capsys)[0] == 0
    for state in (tmp_path / "study" / "out" / "trial-0").glob("checkpoint-*/trainer_state.json"):
        state.write_text(state.read_text()[:200])
    code, err = _export(path, tmp_path / "e", capsys)
    assert code == 1, err
    assert "trainer_state.json: not readable JSON (" in err and "export another trial" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "e").exists()
