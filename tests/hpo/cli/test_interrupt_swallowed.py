"""A Ctrl-C that Python swallowed while the command imported (KeyboardInterrupt raised in a finalizer: "Exception
ignored") still stops `hpo train` and `hpo run --in-process` before any work: exit 130, "nothing was saved", no trial
and no checkpoint written. The pool's and the worker's handlers are checked in tests/hpo/scheduling."""

from __future__ import annotations

import pytest
import yaml
from scheduler_support import trials
from study_task import write_study
from swallowed_press import press_swallowed, restoring_sigint

from hpo.cli import main

sigint_restored = pytest.fixture(autouse=True)(restoring_sigint)


def _cli(args: list[str], capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    return exit_info.value.code, capsys.readouterr().err


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_run_in_process_stops_before_its_first_trial(tmp_path, capsys):
    path = write_study(tmp_path)
    press_swallowed()
    code, err = _cli(["run", str(path), "--in-process", "--no-dry-run", "--n-trials", "2"], capsys)
    assert code == 130, err
    assert "stopped: nothing was saved: no trial had started; continue with: hpo run" in err
    assert trials(tmp_path) == []


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_train_stops_before_training(tmp_path, capsys):
    study = yaml.safe_load(write_study(tmp_path).read_text())
    run = {
        "name": "swallowed",
        "output_dir": str(tmp_path / "run"),
        "task": study["task"],
        "training": {**study["training"], "max_steps": 4},
        "tracking": {"store": False},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(run))
    press_swallowed()
    code, err = _cli(["train", str(path)], capsys)
    assert code == 130, err
    assert "stopped before training started: nothing was saved; continue with: hpo train" in err
    assert not list((tmp_path / "run").glob("checkpoint-*"))
