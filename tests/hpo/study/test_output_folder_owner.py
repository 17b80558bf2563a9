"""An output folder belongs to one study: a second study with the same name (on another storage, or created anew after
the first was deleted) is refused before its workers run a trial there, exit 2 in one line; the same study on the same
storage continues there, as after a crash."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest
from study_task import write_study

from hpo.cli import main
from hpo.storage.database import create_storage


def hpo(*args: str, capsys) -> tuple[int, str]:
    """`hpo ARGS` in this process: its exit code and what it printed."""
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    printed = capsys.readouterr()
    return int(exit_info.value.code or 0), printed.out + printed.err


def trial_folders(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "out").glob("trial-*"))


def assert_refused(code: int, output: str, tmp_path: Path) -> None:
    folder = tmp_path / "out"
    assert code == 2, output
    (line,) = [line for line in output.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: study.output_dir: {folder} ")
    assert "--set study.output_dir=<new folder>" in line and f"delete {folder}" in line
    assert "Traceback" not in output
    # The workers started ahead were ended. wandb's own service, started by an earlier test in the same process (one
    # pytest-xdist worker runs many files), outlives that test by design and is not this run's.
    left = [child for child in psutil.Process().children(recursive=True) if child.name() != "wandb-core"]
    assert not left, left


def test_the_same_name_on_another_storage_is_refused(tmp_path: Path, capsys) -> None:
    path = write_study(tmp_path, study={"n_trials": 1})
    assert hpo("run", str(path), "--in-process", capsys=capsys)[0] == 0
    other = tmp_path / "other.db"
    code, output = hpo("run", str(path), "--workers", "1", "--storage", f"sqlite:///{other}", capsys=capsys)
    assert_refused(code, output, tmp_path)
    assert f"another study 'test' on sqlite:///{tmp_path / 'out' / 'study.db'}" in output
    assert not other.exists()  # refused before the study was created there
    assert trial_folders(tmp_path) == ["trial-0"]


@pytest.mark.parametrize("marker", ["kept", "deleted too"])
def test_a_study_deleted_and_created_anew_is_refused(tmp_path: Path, capsys, marker: str) -> None:
    path = write_study(tmp_path, study={"n_trials": 1})
    assert hpo("run", str(path), "--in-process", capsys=capsys)[0] == 0
    for database in (tmp_path / "out").glob("study.db*"):
        database.unlink()
    if (
        marker == "deleted too"
    ):  # as a folder written before markers existed: trial folders, no record of whose
        (tmp_path / "out" / ".hpo" / "study.json").unlink()
    code, output = hpo("run", str(path), "--workers", "1", capsys=capsys)
    assert_refused(code, output, tmp_path)
    assert trial_folders(tmp_path) == ["trial-0"]


def test_the_same_study_on_the_same_storage_continues_in_its_folder(tmp_path: Path, capsys) -> None:
    path = write_study(tmp_path, study={"n_trials": 1})
    assert hpo("run", str(path), "--in-process", capsys=capsys)[0] == 0
    marker = json.loads((tmp_path / "out" / ".hpo" / "study.json").read_text())
    url = f"sqlite:///{tmp_path / 'out' / 'study.db'}"
    storage = create_storage(url)
    stored = storage.get_study_system_attrs(storage.get_study_id_from_name("test"))
    assert marker["study_name"] == "test" and marker["storage"] == url
    assert marker["study_uid"] == stored["hpo:study_uid"]
    code, output = hpo("run", str(path), "--in-process", "--n-trials", "2", capsys=capsys)
    assert code == 0, output
    assert trial_folders(tmp_path) == ["trial-0", "trial-1"]
