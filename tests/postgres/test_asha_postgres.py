"""ASHA with two `hpo worker` processes standing in for two machines on one PostgreSQL study: every trial is judged
at its rungs once, no pause point is resumed twice, and n_trials counts configurations."""

from __future__ import annotations

import uuid

import optuna
import pytest
from optuna.trial import TrialState
from scheduler_support import slow_study, start_machine

from hpo.storage import pause
from hpo.storage.database import create_storage

pytestmark = pytest.mark.postgres

ASHA = {
    "type": "asha",
    "min_resource": 4,
    "max_resource": 16,
    "reduction_factor": 2,
    "continue_in_place": False,
}


def test_two_machines_never_resume_a_paused_trial_twice(tmp_path, postgres_url):
    slow_study(
        tmp_path,
        delay=0.01,
        study={"n_trials": 12, "scheduler": ASHA, "sampler": {"type": "random", "seed": 2}},
        training={"max_steps": 16},
    )
    name = f"pg-asha-{uuid.uuid4().hex[:8]}"
    machines = [start_machine(tmp_path, postgres_url, name, "--workers", "2") for _ in range(2)]
    outputs = [m.communicate(timeout=300)[0] for m in machines]
    assert [m.returncode for m in machines] == [0, 0], outputs
    done = optuna.load_study(study_name=name, storage=create_storage(postgres_url)).get_trials(deepcopy=False)
    assert len(done) == 12
    assert {t.state for t in done} <= {TrialState.COMPLETE, TrialState.PRUNED}, [
        (t.number, t.state.name, t.user_attrs.get("error")) for t in done
    ]
    resumes = [t.system_attrs.get(pause.RESUMED_AT) or [] for t in done]
    assert any(resumes)
    assert all(len(r) == len(set(r)) for r in resumes), resumes
