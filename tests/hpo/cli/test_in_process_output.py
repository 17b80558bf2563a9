"""`hpo run --in-process` prints what a forked run prints: the study line, one line per finished trial and the
summary, never a trial's log dicts (PrinterCallback, with disable_tqdm) or progress bars between the table's rows."""

from __future__ import annotations

import optuna
import pytest
from study_task import write_study

from hpo.cli import main


@pytest.fixture(autouse=True)
def _optuna_verbosity():
    before = optuna.logging.get_verbosity()
    yield
    optuna.logging.set_verbosity(before)


@pytest.mark.parametrize("disable_tqdm", [True, False])
def test_in_process_trials_print_no_log_lines(tmp_path, capsys, disable_tqdm):
    path = write_study(tmp_path, study={"n_trials": 2}, training={"disable_tqdm": disable_tqdm})
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(path), "--in-process", "--no-dry-run"])
    out, err = capsys.readouterr()
    assert exit_info.value.code == 0, out + err
    lines = [line for line in (out + err).splitlines() if line.strip()]
    assert not [line for line in lines if "'loss'" in line or "eval_loss" in line or "step/s" in line], lines
    assert sum(line.startswith("trial ") for line in lines) == 2
