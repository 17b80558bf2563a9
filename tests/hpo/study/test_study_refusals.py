"""`hpo run` refuses, before any trial starts, configurations that would run but not do what they say: exit 2, the
field named, no traceback, no study created."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest
from study_task import write_study

from hpo.cli import main

TWO_OBJECTIVES = {"metric": None, "direction": None, "metrics": ["accuracy", "loss"]}
CASES = {
    "pruner with two objectives": (
        {"study": {**TWO_OBJECTIVES, "pruner": {"type": "median"}}},
        "study.pruner: Optuna cannot prune a study with several objectives",
    ),
    "pruner with evaluation off": (
        {"study": {"pruner": {"type": "hyperband"}}, "training": {"eval_strategy": "no"}},
        "study.pruner: pruning needs evaluations during training",
    ),
    "metric evaluation does not produce": (
        {"study": {"metric": "f1"}},
        "study.metric: evaluation does not produce eval_f1",
    ),
    "unknown key": ({"study": {"n_trails": 3}}, "study.n_trails"),
    "log range starting at zero": (
        {"search_space": {"learning_rate": {"type": "float", "low": 0.0, "high": 0.1, "log": True}}},
        "search_space.learning_rate.low: must be > 0 when log is true",
    ),
    "enqueued value outside the space": (
        {"study": {"enqueue": [{"learning_rate": 5.0}]}},
        "study.enqueue.0.learning_rate",
    ),
    "condition on an unknown parameter": (
        {
            "search_space": {
                "learning_rate": {"type": "float", "low": 1e-3, "high": 0.1},
                "momentum": {"type": "float", "low": 0.0, "high": 0.9, "when": {"optimizer": "sgd"}},
            }
        },
        "search_space.momentum.when.optimizer",
    ),
    "unknown sampler option": (
        {"study": {"sampler": {"type": "tpe", "n_startup_trial": 3}}},
        "study.sampler.n_startup_trial",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_refused_configuration_exits_2_naming_the_field(case: str, tmp_path: Path, capsys) -> None:
    sections, message = CASES[case]
    study = {"n_trials": 2, **sections.get("study", {})}
    path = write_study(tmp_path, **{**sections, "study": study})
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(path), "--in-process"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "out" / "study.db").exists()  # refused before the study was even created


def test_a_refusal_after_the_workers_started_ahead_ends_them_quietly(tmp_path: Path, capsys) -> None:
    """The scheduler starts its worker processes before the dry run (they import torch meanwhile): a refused file
    still exits 2 in one line, and leaves neither a worker process nor a traceback in the worker logs."""
    path = write_study(tmp_path, study={"n_trials": 2, "metric": "f1"})
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(path), "--workers", "2"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert "study.metric: evaluation does not produce eval_f1" in err and "Traceback" not in err
    assert not psutil.Process().children(recursive=True)
    logs = sorted((tmp_path / "out" / ".hpo" / "logs").glob("worker-*.log"))
    assert len(logs) == 2 and all("Traceback" not in log.read_text() for log in logs)
