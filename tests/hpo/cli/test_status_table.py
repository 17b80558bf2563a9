"""`hpo status` as a user reads it in a narrow terminal: a real study on SQLite, the real CLI, COLUMNS=80."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from cli_support import PBT
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState, create_trial
from study_task import write_study

from hpo.cli import main
from hpo.cli.options import trial_line
from hpo.spec import load_study_spec
from hpo.storage.lineage import latest_by_member, segments
from hpo.storage.study_db import open_study
from hpo.study import run_study

STATES = [TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL]


@pytest.fixture(autouse=True)
def _optuna_verbosity():
    """The study commands quieten Optuna's logger (global state): put it back for the tests that follow."""
    before = optuna.logging.get_verbosity()
    yield
    optuna.logging.set_verbosity(before)


def _cli(args: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def _trial(number: int) -> optuna.trial.FrozenTrial:
    """A trial with four parameters, peak memory and a checkpoint: every optional column of the table shows."""
    state = STATES[number % 3]
    return create_trial(
        state=state,
        value=0.9 + number / 1000 if state == TrialState.COMPLETE else None,
        params={
            "learning_rate": 0.00204722352812965,
            "hidden": 128 + number,
            "dropout": 0.125,
            "optim": "adamw",
        },
        distributions={
            "learning_rate": FloatDistribution(1e-5, 0.1, log=True),
            "hidden": IntDistribution(8, 512),
            "dropout": FloatDistribution(0.0, 0.5),
            "optim": CategoricalDistribution(["adamw", "sgd"]),
        },
        user_attrs={
            "duration_s": 12.5,
            "peak_rss": 300 << 20,
            "peak_gpu_memory": 2 << 30,
            "trainable_params": 123_456,
            "checkpoint_bytes": 33 << 20,
            **({"pruned_step": 4} if state == TrialState.PRUNED else {}),
        },
    )


def study_trials(path: Path) -> list[optuna.trial.FrozenTrial]:
    return open_study(load_study_spec(path)).get_trials(deepcopy=False)


def _rows(out: str, first_header: str) -> dict[str, list[str]]:
    """The rows of the table whose header starts with `first_header`, keyed by their first cell (wrapped
    continuation lines, whose first cell is empty, are left out)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("┃") and first_header in line)
    rows: dict[str, list[str]] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("│"):
            break
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if cells[0]:
            rows[cells[0]] = cells
    return rows


def test_status_at_80_columns_shows_every_trial_number_state_and_params(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    path = write_study(tmp_path, study={"n_trials": 12})
    study = open_study(load_study_spec(path))
    for number in range(12):
        study.add_trial(_trial(number))
    code, out, err = _cli(["status", str(path)], capsys)
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 80
    rows = _rows(out, "state")
    expected = {f"{n}{' *' if n == 9 else ''}": STATES[n % 3].name for n in range(12)}  # 9 has the best value
    assert {number: cells[1] for number, cells in rows.items()} == expected
    # Params wrap between parameters, never inside one: each `name=value` reads whole on some line.
    for text in ("learning_rate=0.00204722", "dropout=0.125", "optim=adamw", "hidden=139"):
        assert text in out
    assert rows["1"][-1] == "4"  # pruned at step 4
    # Memory and checkpoint columns that do not fit beside the params get a table of their own, by trial number.
    memory = _rows(out, "peak gpu")
    assert set(memory) == set(expected)
    assert memory["3"][1:] == ["2.0 GiB", "300.0 MiB", "123.5k", "33.0 MiB"]


def test_status_in_a_wide_terminal_keeps_one_table(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    path = write_study(tmp_path, study={"n_trials": 3})
    study = open_study(load_study_spec(path))
    for number in range(3):
        study.add_trial(_trial(number))
    code, out, err = _cli(["status", str(path)], capsys)
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.startswith("┃"))
    assert "params" in header and "peak gpu" in header and "checkpoint" in header
    assert sum(line.startswith("┏") for line in out.splitlines()) == 1


def test_status_shows_a_requeued_attempt_as_requeued_with_its_reason(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    path = write_study(tmp_path, study={"n_trials": 3})
    study = open_study(load_study_spec(path))
    for number in range(2):
        study.add_trial(_trial(number))
    study.add_trial(
        create_trial(state=TrialState.FAIL, user_attrs={"requeued": True, "error": "CUDA out of memory"})
    )
    code, out, err = _cli(["status", str(path)], capsys)
    assert code == 0, err
    assert {number: cells[1] for number, cells in _rows(out, "state").items()} == {
        "0 *": "COMPLETE",
        "1": "PRUNED",
        "2": "REQUEUED",
    }
    assert "trial 2 failed: CUDA out of memory (queued again: the next `hpo run` resumes it)" in out
    assert "1 complete, 1 pruned, 1 requeued" in out


def test_status_of_a_pbt_study_shows_each_members_step_copies_current_values_and_whole_time(
    tmp_path: Path, capsys, monkeypatch
):
    monkeypatch.setenv("COLUMNS", "200")
    path = write_study(
        tmp_path,
        study={"scheduler": PBT, "sampler": {"type": "random", "seed": 0}},
        training={"max_steps": None, "lr_scheduler_type": "linear"},
        search_space={"learning_rate": {"type": "float", "low": 1.0e-4, "high": 0.5, "log": True}},
        resources={"heartbeat_interval": 1, "grace_period": 3},
    )
    run_study(path, workers=2, dry_run=False)  # the real scheduler: 4 members pausing at steps 4 and 8
    capsys.readouterr()
    code, out, err = _cli(["status", str(path)], capsys)
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.startswith("┃"))
    columns = [cell.strip() for cell in header.split("┃")[1:-1]]
    rows = {
        number.rstrip(" *"): dict(zip(columns, cells, strict=True))
        for number, cells in _rows(out, "state").items()
    }
    found = study_trials(path)
    latest = latest_by_member(found)
    copied = paused = 0
    for trial in found:
        row = rows[str(trial.number)]
        own = segments(latest[trial.number])
        assert row["step"] == "12"  # where the member is: the end of training
        # The values it trains with now (after its copies and explorations), not the ones it was sampled with.
        assert row["params"] == f"learning_rate={own[-1].params['learning_rate']:.6g}"
        assert row["params"] in trial_line(trial)  # the line `hpo run` printed for it says the same
        copies = [f"{s.source} at step {s.step}" for s in own if s.source is not None]
        assert row["copied from"] == (", ".join(copies) or "-")
        copied += len(copies)
        # Every piece of its training (a member pauses at an interval unless it is decided there at once and kept,
        # then it trains on in place), not only the last: the time is the member's accumulated training time (each
        # process adds its own to the one it resumed), not its last piece's span.
        paused += len(trial.user_attrs.get("pauses") or [])
        assert float(row["time (s)"]) == pytest.approx(trial.user_attrs["duration_s"], abs=0.051)
    assert copied == 2  # the bottom member at each of the two intervals
    assert paused > 0  # four members on two slots: some trained in pieces
