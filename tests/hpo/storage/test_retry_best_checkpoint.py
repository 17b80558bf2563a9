"""A retry whose best evaluation came before its predecessor crashed keeps that model: its best checkpoint is the
predecessor's (in the predecessor's folder), retention keeps it there, and `hpo export` ships it (found by
tests/chaos/campaign.py: such a retry recorded no best checkpoint, retention deleted the predecessor's, and export refused)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_support import run_hpo
from optuna.trial import TrialState
from scheduler_support import run_hpo_to_end, trials
from study_task import write_study

from hpo.export.write import export_study
from hpo.spec import load_study_spec


def _study_with_a_retry(tmp_path: Path, keep: dict) -> Path:
    """One trial killed after its step-8 save, its best evaluation at step 4; its retry completes."""
    return write_study(
        tmp_path,
        study={"n_trials": 1, "objective": "best", "pruner": {"type": "none"}} | {"keep_checkpoints": keep},
        task={"compute_metrics": "study_task:compute_peaked_metrics"},  # the best evaluation is at step 4
        training={"max_steps": 12},
        resources={"workers": 1, "heartbeat_interval": 1, "grace_period": 3},
        callbacks=[
            {"import": "study_task:StepClock"},
            {
                "import": "study_task:KillOnceAfterSave",
                "args": {"step": 8, "marker": str(tmp_path / "killed")},
            },
        ],
    )


@pytest.mark.slow  # 10 s on 2 cores: run by .ci/run's slow suite
def test_a_retry_keeps_and_exports_the_best_checkpoint_its_predecessor_saved(tmp_path):
    path = _study_with_a_retry(tmp_path, keep={"top_k": 1})
    run_hpo_to_end(tmp_path, "run")
    assert (tmp_path / "killed").exists(), "the kill hook never fired"
    found = trials(tmp_path)
    crashed = next(t for t in found if t.number == 0)
    retry = next(t for t in found if t.user_attrs.get("requeued_from_trial") == 0)
    assert crashed.state == TrialState.FAIL and retry.state == TrialState.COMPLETE
    assert retry.user_attrs["best_step"] == 4 and retry.value > 1.0  # scored before the crash (accuracy + 1)
    best = Path(retry.user_attrs["best_checkpoint"])
    assert (
        best == Path(crashed.user_attrs["run_dir"]) / "checkpoint-4"
        and (best / "model.safetensors").is_file()
    )
    result = export_study(load_study_spec(path), tmp_path / "exported")
    assert result.recorded["eval_accuracy"] == retry.value


@pytest.mark.slow  # 13 s on 2 cores: run by .ci/run's slow suite
def test_export_refuses_a_newer_checkpoint_when_the_best_one_is_gone(tmp_path):
    """A damaged disk deleted the best checkpoint: the retry's newest (step 12) is another model than the one its value
    was measured on (step 4), so export refuses in one line naming the step and the folders, instead of shipping it
    under that value (found by tests/chaos: seed 810748)."""
    _study_with_a_retry(tmp_path, keep={"top_k": None})  # every checkpoint kept
    run_hpo_to_end(tmp_path, "run")
    retry = next(t for t in trials(tmp_path) if t.user_attrs.get("requeued_from_trial") == 0)
    shutil.rmtree(retry.user_attrs["best_checkpoint"])
    assert (Path(retry.user_attrs["run_dir"]) / "checkpoint-12").is_dir()
    done = run_hpo(tmp_path, "export", "study.yaml", "--out", str(tmp_path / "exported"))
    assert done.returncode == 1 and not (tmp_path / "exported").exists()
    message = done.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert f"trial {retry.number}'s value {retry.value:g} was measured at step 4" in message
    assert "trial-0" in message and "checkpoint-12, holds another model" in message
