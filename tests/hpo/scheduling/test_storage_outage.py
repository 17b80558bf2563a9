"""A trial whose database fails under it (a PostgreSQL restart mid-study: the connection error reaches the trial
through a report or a write) is queued again from its newest checkpoint, whatever `retry_on_exception` says: the
configuration did not fail (tests/chaos/campaign.py seed 186055 ended such a trial FAIL for good)."""

from __future__ import annotations

from pathlib import Path

from optuna.trial import TrialState
from scheduler_support import trials
from study_task import write_study

from hpo.study import run_study

# compute_metrics fails once with the error a real database connection raises when its server is gone (here: a
# SQLite file in a folder that does not exist, so no server is needed); a flag file makes it fail exactly once.
OUTAGE_TASK = """
from pathlib import Path

import sqlalchemy
from study_task import compute_metrics as accuracy

HERE = Path(__file__).parent


def compute_metrics(prediction):
    try:
        (HERE / "outage").rename(HERE / "outage-raised")
    except FileNotFoundError:
        return accuracy(prediction)
    sqlalchemy.create_engine(f"sqlite:///{HERE}/no-such-folder/study.db").connect()
"""


def test_a_trial_whose_database_failed_is_queued_again_without_retry_on_exception(tmp_path: Path) -> None:
    path = write_study(
        tmp_path,
        study={"n_trials": 3, "pruner": {"type": "none"}},
        task={"compute_metrics": "outage_task:compute_metrics"},
        resources={"retry_on_exception": False},
    )
    (tmp_path / "outage_task.py").write_text(OUTAGE_TASK)
    (tmp_path / "outage").touch()
    run_study(path, workers=1, dry_run=False)
    found = trials(tmp_path)
    assert (tmp_path / "outage-raised").exists()  # the outage happened
    [failed] = [t for t in found if t.state == TrialState.FAIL]
    assert failed.user_attrs["requeued"] is True and failed.user_attrs["storage_outage"] is True
    assert "OperationalError" in failed.user_attrs["error"]
    [retry] = [t for t in found if t.user_attrs.get("requeued_from_trial") == failed.number]
    assert retry.state == TrialState.COMPLETE and retry.params == failed.params
    assert len([t for t in found if t.state == TrialState.COMPLETE]) == 3  # n_trials exact
