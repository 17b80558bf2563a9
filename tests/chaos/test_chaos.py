"""The chaos harness, short: every fault kind at least once on SQLite (and on PostgreSQL when HPO_TEST_POSTGRES_URL is
set), each study run to the end by restarting `hpo run` as a user would, and no invariant violated (tests/chaos/campaign.py).
Real processes, signals and storages; a few minutes on 2 cores. Gates CI (.ci/run, after the postgres suite)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from campaign import LEAVE_WAIT_S, RUN_DEADLINE_S, open_object_store, run_one
from plan import Fault, Scenario, time_scale

# The harness scales its own limits to the load each run meets (plan.time_scale); pytest's limit is only a
# backstop above them, for the load at collection (at least 4 times an idle machine's), never the one that trips.
BACKSTOP_S = int((RUN_DEADLINE_S + LEAVE_WAIT_S) * max(time_scale(), 4.0) + 600)
pytestmark = [pytest.mark.chaos, pytest.mark.timeout(BACKSTOP_S)]

# One study per kind, its faults chosen so that every kind of fault lands on some study.
SQLITE_SCENARIOS = [
    Scenario(
        1, "pruner", False, 2, False, [Fault("kill_trial", 0.5), Fault("exception", 0.2, "compute_metrics")]
    ),
    Scenario(
        2, "asha", False, 2, True, [Fault("kill_worker", 0.5), Fault("damage_checkpoint", 0.5, "truncate")]
    ),
    Scenario(3, "pbt", False, 2, False, [Fault("kill_run", 1.0), Fault("stop_worker", 0.5)]),
    Scenario(4, "retry", False, 1, False, [Fault("exception", 0.1, "model_init"), Fault("preempt", 0.8)]),
    Scenario(5, "pruner", False, 1, False, [Fault("second_run", 0.2), Fault("disk_full", 0.2, "16384")]),
]


def check(scenario: Scenario, folder: Path, url: str | None = None, pg_data: Path | None = None) -> None:
    outcome = run_one(scenario, folder, url, pg_data)
    missed = [f.kind for f in scenario.faults if not f.injected]
    assert outcome.violations == [], (scenario.describe(), outcome.notes)
    assert missed == [] or set(missed) <= {"damage_checkpoint"}, missed  # a checkpoint may be gone already


@pytest.mark.parametrize(
    "scenario", SQLITE_SCENARIOS, ids=lambda s: f"{s.study}-{'-'.join(f.kind for f in s.faults)}"
)
def test_a_study_survives_its_faults_on_sqlite(tmp_path: Path, scenario: Scenario) -> None:
    check(scenario, tmp_path / "study")


@pytest.mark.postgres
def test_a_study_survives_a_postgres_restart_and_killed_workers(tmp_path: Path, postgres_url: str) -> None:
    pg_data = os.environ.get("HPO_PG_DATA")
    faults = [Fault("kill_worker", 0.5), Fault("pg_restart" if pg_data else "kill_trial", 0.5)]
    scenario = Scenario(6, "asha", True, 2, True, faults)
    check(scenario, tmp_path / "study", postgres_url, Path(pg_data) if pg_data else None)


@pytest.mark.postgres
def test_a_study_waits_out_a_postgres_outage_with_a_worker_killed_inside_it(
    tmp_path: Path, postgres_url: str, pg_data: str
) -> None:
    """The server down for 40 s from a random moment (`pg_outage`), a worker killed while it is down: the study ends
    with no configuration lost to the outage and no report missing."""
    faults = [Fault("pg_outage", 0.5, "40"), Fault("kill_worker", 5.0)]
    check(Scenario(7, "pruner", True, 2, False, faults), tmp_path / "study", postgres_url, Path(pg_data))


@pytest.mark.s3
def test_a_study_waits_out_an_object_store_outage(tmp_path: Path, s3_endpoint: str) -> None:
    """The object store refuses every connection for 30 s while trials upload their checkpoints (`s3_outage`): uploads
    wait, no configuration ends FAIL for it, and the best checkpoint exports from the store."""
    store = open_object_store(s3_endpoint)
    faults = [Fault("s3_outage", 0.5, "30"), Fault("kill_trial", 2.0)]
    scenario = Scenario(8, "asha", False, 2, False, faults, object_store=True)
    outcome = run_one(scenario, tmp_path / "study", None, None, store)
    assert outcome.violations == [], (scenario.describe(), outcome.notes)
    assert all(f.injected for f in scenario.faults), scenario.faults
