"""PostgreSQL stopped for seconds under a running trial, then started again: the worker's heartbeats during the outage
are skipped, the trial trains on in its (warm) process, and the study completes. Before, the first failed beat ended
the worker's supervision of the trial, and the worker's exit then waited for ever on its warm trial process
(tests/chaos/campaign.py seed 498873; CI's chaos suite, stop 34)."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from scheduler_support import slow_study, start_machine

from hpo.storage.database import create_storage

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parents[2]

# A callback in the trial process: at step 8 of the study's first trial, stop the server (as its owner; it refuses to
# run as root), wait OUTAGE_S with the training loop held, start it again with the CI's own script (same port).
OUTAGE_TASK = f"""
import os
import subprocess
import time
from pathlib import Path

from trainer import TrainerCallback

HERE = Path(__file__).parent
OUTAGE_S = 2.5


def _as_owner(command):
    return ["runuser", "-u", "postgres", "--", *command] if os.getuid() == 0 else command


class StopPostgresOnce(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step != 8 or (HERE / "outage").exists():
            return
        (HERE / "outage").touch()
        data = os.environ["HPO_PG_DATA"]
        pg_ctl = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))[-1]
        subprocess.run(_as_owner([str(pg_ctl), "-D", data, "-m", "fast", "-w", "stop"]), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(OUTAGE_S)
        subprocess.run(["bash", "{REPO / ".ci" / "postgres.sh"}", "start"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""


def test_a_trial_trains_through_a_postgres_outage_and_the_study_completes(tmp_path, postgres_url, pg_data):
    slow_study(
        tmp_path,
        delay=0.01,
        training={"max_steps": 24, "save_strategy": "no"},
        study={"pruner": {"type": "none"}},
        resources={
            "heartbeat_interval": 1,
            "grace_period": 20,
        },  # the outage is shorter than the grace period
        callbacks=[{"import": "outage_task:StopPostgresOnce"}],
    )
    (tmp_path / "outage_task.py").write_text(OUTAGE_TASK)
    name = f"pg-{uuid.uuid4().hex[:8]}"
    machine = start_machine(tmp_path, postgres_url, name, "--n-trials", "3", "--workers", "1")
    try:
        output = machine.communicate(timeout=180)[0]
    except subprocess.TimeoutExpired:
        os.killpg(machine.pid, signal.SIGKILL)
        pytest.fail("hpo worker did not end within 180 s of a 2.5 s PostgreSQL outage")

    assert (tmp_path / "outage").exists()  # the outage happened
    assert machine.returncode == 0, output
    trials = optuna.load_study(study_name=name, storage=create_storage(postgres_url)).get_trials(
        deepcopy=False
    )
    assert [t.state for t in sorted(trials, key=lambda t: t.number)] == [TrialState.COMPLETE] * 3, [
        (t.number, t.state.name, t.user_attrs.get("error")) for t in trials
    ]
    logs = "".join(p.read_text() for p in (tmp_path / "out" / ".hpo" / "logs").glob("worker-*.log"))
    assert "trial 0: its heartbeat could not be recorded" in logs, logs
    assert len({t.user_attrs["pid"] for t in trials}) == 1  # one warm trial process ran all three
