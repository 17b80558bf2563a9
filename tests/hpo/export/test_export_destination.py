"""Where `hpo export` writes: an earlier export is replaced as a whole (written to a temporary sibling, then swapped
in), so no file of the old export stays beside the new one and no temporary sibling is left; a folder that is not an
export is refused, and so is the current folder (it cannot be swapped away under the user's shell). `--metric` on a
single-objective study is refused unless it names the objective, instead of being silently ignored."""

from __future__ import annotations

import json
import os
from pathlib import Path

import optuna
import pytest
from study_task import write_study

from hpo.cli import main


@pytest.fixture(scope="module")
def study_file(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("export-destination")
    path = write_study(folder, study={"n_trials": 2, "keep_checkpoints": {"top_k": None}})
    with pytest.raises(SystemExit) as stopped:
        main(["run", str(path), "--in-process", "--no-dry-run"])
    assert stopped.value.code == 0
    return path


@pytest.fixture(autouse=True)
def _optuna_verbosity():
    before = optuna.logging.get_verbosity()
    yield
    optuna.logging.set_verbosity(before)


def _cli(args: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def test_a_second_export_replaces_the_first_as_a_whole(study_file, tmp_path, capsys):
    out = tmp_path / "export"
    assert _cli(["export", str(study_file), "--out", str(out), "--trial", "0", "--no-eval"], capsys)[0] == 0
    fresh = sorted(p.name for p in out.iterdir())
    (out / "old-notes.txt").write_text("from the first export")
    assert _cli(["export", str(study_file), "--out", str(out), "--trial", "1", "--no-eval"], capsys)[0] == 0
    assert sorted(p.name for p in out.iterdir()) == fresh
    assert json.loads((out / "export.json").read_text())["trial_number"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]  # no staging or previous sibling left


def test_export_into_the_current_folder_is_refused_in_one_line(study_file, tmp_path, capsys, monkeypatch):
    out = tmp_path / "export"
    assert _cli(["export", str(study_file), "--out", str(out), "--trial", "0", "--no-eval"], capsys)[0] == 0
    monkeypatch.chdir(out)
    code, _, err = _cli(["export", str(study_file), "--out", ".", "--trial", "1", "--no-eval"], capsys)
    assert code == 2, err
    assert err.strip().startswith("error: --out .: ") and len(err.strip().splitlines()) == 1, err
    assert json.loads((out / "export.json").read_text())["trial_number"] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]
    assert os.getcwd() == str(out)


def test_metric_on_a_single_objective_study_is_refused_unless_it_is_the_objective(
    study_file, tmp_path, capsys
):
    out = tmp_path / "export"
    code, _, err = _cli(
        ["export", str(study_file), "--out", str(out), "--metric", "loss", "--no-eval"], capsys
    )
    assert code == 2
    assert err.strip() == (
        "error: --metric loss: the study has one objective (eval_accuracy), whose best trial is taken; leave "
        "--metric out, or pick a trial with --trial N"
    )
    assert not out.exists()
    assert (
        _cli(["export", str(study_file), "--out", str(out), "--metric", "accuracy", "--no-eval"], capsys)[0]
        == 0
    )


def test_metric_with_trial_is_refused(study_file, tmp_path, capsys):
    code, _, err = _cli(
        ["export", str(study_file), "--out", str(tmp_path / "e"), "--trial", "0", "--metric", "accuracy"],
        capsys,
    )
    assert code == 2
    assert err.strip() == "error: --metric: --trial 0 names the trial; give one of --trial and --metric"
