"""A strategy whose package is not installed is refused with one line naming the extra to install, exit 2, before any
rank or trial starts. "Not installed" is made real for this process the way Python documents it: a `None` entry in
`sys.modules` makes `import deepspeed` raise ImportError."""

from __future__ import annotations

import sys

import pytest
import yaml
from study_task import write_study

from hpo.cli import main

EXPECTED = "deepspeed is not installed: install hpo[deepspeed] (pip install 'hpo[deepspeed]')"


@pytest.fixture(autouse=True)
def _no_deepspeed(monkeypatch):
    monkeypatch.setitem(sys.modules, "deepspeed", None)


def _cli(args: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def test_train_with_strategy_deepspeed_says_what_to_install(tmp_path, capsys):
    study = yaml.safe_load(write_study(tmp_path).read_text())
    run = {"output_dir": str(tmp_path / "run"), "task": study["task"], "training": study["training"]}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({**run, "tracking": {"store": False}}))
    code, out, err = _cli(["train", str(path), "--strategy", "deepspeed", "--nproc", "2"], capsys)
    assert code == 2, out + err
    assert err.strip() == f"error: {path}: training.strategy: {EXPECTED}"
    assert not (tmp_path / "run").exists()  # no rank started


@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ("resources.strategy=deepspeed", "resources.strategy"),
        ("training.strategy=deepspeed", "training.strategy"),
    ],
)
def test_run_of_a_deepspeed_study_says_what_to_install(tmp_path, capsys, setting, field):
    path = write_study(tmp_path, study={"n_trials": 1}, resources={"ranks_per_trial": 2})
    code, out, err = _cli(["run", str(path), "--set", setting], capsys)
    assert code == 2, out + err
    assert err.strip() == f"error: {path}: {field}: {EXPECTED}"
    assert not (tmp_path / "out" / "trial-0").exists()
