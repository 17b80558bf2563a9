"""ASHA with two `hpo worker` processes standing in for two machines on one PostgreSQL study: every trial is judged
at its rungs once, no pause point is resumed twice, and n_trials counts configurations."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from scheduler_support import slow_study

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


def _machine(folder: Path, url: str, name: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "hpo.cli", "worker", str(folder / "study.yaml"), "--storage", url]
    command += ["--set", f"study.name={name}", "--workers", "2"]
    return subprocess.Popen(
        command,
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        start_new_session=True,
    )


def test_two_machines_never_resume_a_paused_trial_twice(tmp_path, postgres_url):
    slow_study(
        tmp_path,
        delay=0.01,
        study={"n_trials": 12, "scheduler": ASHA, "sampler": {"type": "random", "seed": 2}},
        training={"max_steps": 16},
    )
    name = f"pg-asha-{uuid.uuid4().hex[:8]}"
    machines = [_machine(tmp_path, postgres_url, name) for _ in range(2)]
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
