"""`hpo run` on a study file with `resources: {ranks_per_trial: 2}`: each trial is a 2-rank gloo job on CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from study_task import write_study

from hpo.storage.database import create_storage

pytestmark = pytest.mark.distributed


def test_hpo_run_runs_each_trial_on_two_ranks_and_a_pruned_one_does_not_hang(tmp_path: Path) -> None:
    path = write_study(
        tmp_path,
        study={
            "n_trials": 2,
            # A learning rate too small to move the model stays under 0.6 accuracy at step 4: pruned there.
            "pruner": {"type": "threshold", "lower": 0.6},
            "enqueue": [{"learning_rate": 1.0e-4}, {"learning_rate": 0.05}],
        },
        training={"max_steps": 24},
        resources={"ranks_per_trial": 2, "heartbeat_interval": 1, "grace_period": 5},
    )
    started = time.monotonic()
    finished = subprocess.run(
        [sys.executable, "-m", "hpo.cli", "run", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    elapsed = time.monotonic() - started
    assert finished.returncode == 0, finished.stdout + finished.stderr
    study = optuna.load_study(
        study_name="test", storage=create_storage(f"sqlite:///{tmp_path / 'out' / 'study.db'}")
    )
    slow, good = sorted(study.trials, key=lambda t: t.number)
    assert slow.state == TrialState.PRUNED, slow.user_attrs.get("error")
    assert (
        slow.user_attrs["pruned_step"] == 4 and slow.user_attrs["global_step"] == 4
    )  # both ranks stopped there
    assert good.state == TrialState.COMPLETE, good.user_attrs.get("error")
    assert good.user_attrs["global_step"] == 24
    assert [t.user_attrs["ranks"] for t in (slow, good)] == [2, 2]
    # The ranks trained under DDP (resources.strategy's default), set by the study since training.strategy is unset.
    saved = json.loads((Path(good.user_attrs["best_checkpoint"]) / "training_args.json").read_text())
    assert saved["strategy"] == "ddp"
    assert "trial   0 PRUNED   at step 4" in finished.stdout and "trial   1 COMPLETE" in finished.stdout
    assert elapsed < 180, f"took {elapsed:.0f} s: a rank waited on a collective"
