"""Bounded disk: only the best checkpoint of the top-k trials stays, whatever the number of trials."""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.trial import TrialState
from study_task import write_study

from hpo.study.manager import run_study


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


def test_a_chained_retry_keeps_the_checkpoint_it_will_resume_from(tmp_path: Path) -> None:
    """Trial 0 crashed after saving; its retry (trial 1) crashed before saving, so trial 2 is queued to resume from
    trial 0's checkpoint. Cleanup after any trial must leave that checkpoint for trial 2."""
    from hpo.spec import load_study_spec
    from hpo.storage.retention import after_trial
    from hpo.storage.retry import RetryPolicy, fail_running_trial
    from hpo.storage.study_db import open_study

    spec = load_study_spec(write_study(tmp_path, study={"n_trials": 4, "keep_checkpoints": {"top_k": 1}}))
    study = open_study(spec)
    policy = RetryPolicy(max_retries=3, output_dir=spec.output_dir)
    first = study.ask({"learning_rate": optuna.distributions.FloatDistribution(1e-4, 0.1, log=True)})
    first.set_user_attr("run_dir", spec.trial_dir(first.number))
    for step in (4, 8):
        _fake_checkpoint(Path(spec.trial_dir(first.number)) / f"checkpoint-{step}")
    fail_running_trial(study, first._trial_id, "crashed", policy, counts_as_retry=True)

    retry = (
        study.ask()
    )  # trial 1, resuming from trial 0's newest checkpoint; it crashes before its first save
    assert retry.user_attrs["resume_from"] == str(Path(spec.trial_dir(0)) / "checkpoint-8")
    retry.set_user_attr("run_dir", spec.trial_dir(retry.number))
    fail_running_trial(study, retry._trial_id, "crashed", policy, counts_as_retry=True)
    (queued,) = study.get_trials(states=(TrialState.WAITING,))
    assert queued.user_attrs["requeued_from_trial"] == 1
    assert queued.user_attrs["resume_from"] == str(Path(spec.trial_dir(0)) / "checkpoint-8")

    after_trial(spec, study)  # what a worker does after each trial
    assert (Path(spec.trial_dir(0)) / "checkpoint-8").is_dir()  # trial 2 resumes from it
    assert not (Path(spec.trial_dir(0)) / "checkpoint-4").exists()  # nobody needs the older one


def test_a_chained_retry_keeps_the_best_checkpoint_of_the_trial_it_descends_from(tmp_path: Path) -> None:
    """Trial 0 was interrupted at its last step, its best at step 4; its retry (trial 1) failed in model_init, so
    trial 2 resumes from trial 0's last checkpoint and trains nothing more: its best is trial 0's checkpoint-4. It must
    be there when trial 2 ends (the chaos scenario retry-exception-preempt lost it: nothing to export)."""
    from hpo.spec import load_study_spec
    from hpo.storage.retention import after_trial
    from hpo.storage.retry import RetryPolicy, fail_running_trial
    from hpo.storage.study_db import open_study

    spec = load_study_spec(write_study(tmp_path, study={"n_trials": 4, "keep_checkpoints": {"top_k": 1}}))
    study = open_study(spec)
    policy = RetryPolicy(max_retries=3, output_dir=spec.output_dir)
    first = study.ask({"learning_rate": optuna.distributions.FloatDistribution(1e-4, 0.1, log=True)})
    first.set_user_attr("run_dir", spec.trial_dir(first.number))
    best = Path(spec.trial_dir(first.number)) / "checkpoint-4"
    for step in (4, 8, 12):
        _fake_checkpoint(Path(spec.trial_dir(first.number)) / f"checkpoint-{step}")
    first.set_user_attr("best_checkpoint", str(best))
    fail_running_trial(study, first._trial_id, "interrupted at step 12", policy, counts_as_retry=True)
    retry = study.ask()  # trial 1, resuming from checkpoint-12; it fails before its first save
    retry.set_user_attr("run_dir", spec.trial_dir(retry.number))
    fail_running_trial(study, retry._trial_id, "failed in model_init", policy, counts_as_retry=True)

    after_trial(spec, study)  # trial 2 waits to resume from checkpoint-12
    assert best.is_dir() and (best.parent / "checkpoint-12").is_dir()
    assert not (best.parent / "checkpoint-8").exists()  # neither a resume point nor a best


def test_a_failed_trial_whose_retry_is_not_queued_yet_keeps_its_checkpoints(tmp_path: Path) -> None:
    """Between failing a trial and enqueueing its retry (hpo.storage.retry), another worker's cleanup may run."""
    from hpo.spec import load_study_spec
    from hpo.storage.retention import after_trial
    from hpo.storage.study_db import open_study

    spec = load_study_spec(write_study(tmp_path, study={"n_trials": 4, "keep_checkpoints": {"top_k": 1}}))
    study = open_study(spec)
    trial = study.ask({"learning_rate": optuna.distributions.FloatDistribution(1e-4, 0.1, log=True)})
    checkpoint = Path(spec.trial_dir(trial.number)) / "checkpoint-4"
    _fake_checkpoint(checkpoint)
    trial.set_user_attr("requeued", True)
    study.tell(trial, state=TrialState.FAIL)
    after_trial(spec, study)
    assert checkpoint.is_dir()


def _fake_checkpoint(folder: Path) -> None:
    """A complete checkpoint as far as trainer.checkpoint.latest_checkpoint can tell."""
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"")
