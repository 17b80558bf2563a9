"""Two `hpo worker` processes standing in for two machines, sharing one study on PostgreSQL."""

from __future__ import annotations

import os
import signal
import uuid

import optuna
import pytest
from optuna.trial import TrialState
from scheduler_support import MAX_STEPS, slow_study, start_machine, wait_for

from hpo.storage.database import create_storage

pytestmark = pytest.mark.postgres


def _trials(url: str, name: str) -> list[optuna.trial.FrozenTrial]:
    try:
        return optuna.load_study(study_name=name, storage=create_storage(url)).get_trials(deepcopy=False)
    except KeyError:
        return []


def test_two_machines_share_the_study_and_stop_at_n_trials(tmp_path, postgres_url):
    # No pruner: the median pruner would stop some sampled learning rates, and this test is about sharing the study.
    slow_study(
        tmp_path,
        delay=0.01,
        training={"max_steps": 12, "save_strategy": "no"},
        study={"pruner": {"type": "none"}},
    )
    name = f"pg-{uuid.uuid4().hex[:8]}"
    machines = [start_machine(tmp_path, postgres_url, name, "--n-trials", "6") for _ in range(2)]
    outputs = [m.communicate(timeout=240)[0] for m in machines]
    assert [m.returncode for m in machines] == [0, 0], outputs
    done = _trials(postgres_url, name)
    assert sorted(t.number for t in done) == list(range(6))
    assert all(t.state == TrialState.COMPLETE for t in done), [
        (t.number, t.state.name, t.user_attrs.get("error")) for t in done
    ]
    workers = {t.user_attrs["worker"] for t in done}
    assert len(workers) == 2, f"both machines ran trials: {workers}"


def test_a_dead_machines_trial_is_taken_over_and_resumed(tmp_path, postgres_url):
    slow_study(tmp_path)  # heartbeat every 1 s, stale after 3 s
    name = f"pg-{uuid.uuid4().hex[:8]}"
    first = start_machine(tmp_path, postgres_url, name, "--n-trials", "1")

    def running_with_checkpoint():
        for trial in _trials(postgres_url, name):
            if trial.state == TrialState.RUNNING and (tmp_path / "out" / "trial-0" / "checkpoint-8").is_dir():
                return trial
        return None

    try:
        wait_for(running_with_checkpoint, what="trial 0 at checkpoint-8")
        os.killpg(first.pid, signal.SIGKILL)  # the whole machine: its worker and trial die without a word
        first.wait()
        second = start_machine(tmp_path, postgres_url, name, "--n-trials", "1")
        output, _ = second.communicate(timeout=240)
    finally:
        for process in (first,):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    assert second.returncode == 0, output
    crashed, retry = sorted(_trials(postgres_url, name), key=lambda t: t.number)
    assert crashed.state == TrialState.FAIL
    # On one host the second "machine" sees at start that the first one's worker process is gone; on two hosts its
    # heartbeat goes stale (tests/hpo/test_scheduler_crashes.py covers that path).
    assert crashed.user_attrs["error"].startswith("crashed:"), crashed.user_attrs["error"]
    assert crashed.user_attrs["requeued"] is True
    assert retry.state == TrialState.COMPLETE
    assert retry.user_attrs["resumed_from_trial"] == 0
    assert int(retry.user_attrs["resume_from"].rsplit("-", 1)[1]) >= 8
    assert retry.user_attrs["global_step"] == MAX_STEPS
