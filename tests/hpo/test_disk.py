"""Bounded disk: only the best checkpoint of the top-k trials stays, whatever the number of trials."""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.trial import TrialState
from study_task import write_study

from hpo.study import run_study


def _checkpoints(out: Path) -> set[Path]:
    return {p for p in out.glob("trial-*/*checkpoint-*") if p.is_dir()}


def test_only_the_best_checkpoint_of_the_top_k_trials_stays(tmp_path: Path) -> None:
    path = write_study(
        tmp_path,
        study={
            "n_trials": 7,
            "sampler": {"type": "random", "seed": 3},
            "pruner": {"type": "median", "n_startup_trials": 2},
            "keep_checkpoints": {"top_k": 2},
            "enqueue": [{"learning_rate": 0.05}, {"learning_rate": 0.3}],
        },
        search_space={"learning_rate": {"type": "float", "low": 1e-5, "high": 0.5, "log": True}},
    )
    out = tmp_path / "out"
    on_disk_after_each_trial = []
    summary = run_study(
        path, in_process=True, report=lambda trial: on_disk_after_each_trial.append(len(_checkpoints(out)))
    )
    # Each trial saves up to 3 checkpoints (steps 4, 8, 12); after any trial ends at most 2 remain.
    assert len(on_disk_after_each_trial) == 7
    assert max(on_disk_after_each_trial) <= 2
    study = optuna.load_study(study_name="test", storage=summary.storage)
    states = [t.state for t in study.trials]
    assert TrialState.PRUNED in states  # pruned trials did write a checkpoint at step 4 before being pruned
    complete = sorted(
        (t for t in study.trials if t.state == TrialState.COMPLETE), key=lambda t: t.value, reverse=True
    )
    kept = {Path(t.user_attrs["best_checkpoint"]) for t in complete[:2]}
    assert _checkpoints(out) == kept
    for trial in complete[:2]:
        assert Path(trial.user_attrs["best_checkpoint"]).name == f"checkpoint-{trial.user_attrs['best_step']}"
    # Trial folders (logs, metrics) stay; only checkpoints go.
    assert all((out / f"trial-{t.number}").is_dir() for t in study.trials)


def test_top_k_null_keeps_every_checkpoint(tmp_path: Path) -> None:
    path = write_study(
        tmp_path, study={"n_trials": 2, "pruner": {"type": "none"}, "keep_checkpoints": {"top_k": None}}
    )
    run_study(path, in_process=True)
    assert len(_checkpoints(tmp_path / "out")) == 6  # 2 trials x steps 4, 8, 12
