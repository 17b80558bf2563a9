"""A trial's folder as the storage records it (`run_dir`) is trusted only inside the study's output folder: the storage is
shared and is not the study file, and housekeeping deletes checkpoints under that folder."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from study_task import write_study

from hpo.spec import load_study_spec
from hpo.storage.retention import after_trial
from hpo.storage.retry import resume_point
from hpo.storage.run_dirs import trial_run_dir
from hpo.storage.study_db import open_study

LR = {"learning_rate": optuna.distributions.FloatDistribution(1e-4, 0.1, log=True)}


def _fake_checkpoint(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"")
    return folder


@pytest.mark.parametrize("recorded", ["victim", "out/../victim", "out/trial-0/../../victim"])
def test_retention_never_deletes_outside_the_output_folder(tmp_path, recorded):
    spec = load_study_spec(write_study(tmp_path, study={"n_trials": 2, "keep_checkpoints": {"top_k": 0}}))
    victim = _fake_checkpoint(tmp_path / "victim" / "checkpoint-4")
    study = open_study(spec)
    trial = study.ask(LR)
    trial.set_user_attr("run_dir", str(tmp_path / recorded))
    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    own = _fake_checkpoint(Path(spec.trial_dir(trial.number)) / "checkpoint-4")
    after_trial(spec, study)
    assert victim.is_dir()  # another folder's checkpoint: untouched
    assert not own.exists()  # the trial's own folder is where the cleanup looked instead


def test_a_recorded_folder_inside_the_output_folder_is_used(tmp_path):
    out = tmp_path / "out"
    trial = optuna.trial.create_trial(
        state=optuna.trial.TrialState.FAIL, user_attrs={"run_dir": str(out / "x")}
    )
    assert trial_run_dir(trial, out) == out / "x"
    for hostile in ("/", str(tmp_path), "x\0y", 3):
        trial = optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL, user_attrs={"run_dir": hostile})
        assert trial_run_dir(trial, out) == out / f"trial-{trial.number}"


def test_a_retry_resumes_only_from_inside_the_output_folder(tmp_path):
    out = tmp_path / "out"
    _fake_checkpoint(tmp_path / "victim" / "checkpoint-4")
    trial = optuna.trial.create_trial(
        state=optuna.trial.TrialState.FAIL, user_attrs={"run_dir": str(tmp_path / "victim")}
    )
    assert resume_point(trial, str(out)) is None
