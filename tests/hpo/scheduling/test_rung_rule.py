"""A study resumed with other rungs than its rung values were recorded under is refused, naming the field: under
stop-type rungs its trials would be judged against values taken at other steps, under promotion-type ones paused
trials would wait at levels that are no rung (hpo.storage.rung_rule)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import optuna
import pytest
from scheduler_support import trials
from study_task import write_study

from hpo.errors import ConfigError
from hpo.spec import load_study_spec
from hpo.storage.rung_rule import RULE_ATTR
from hpo.storage.study_db import open_study
from hpo.study import run_study

# 36 steps, an evaluation every 4: hpo's default rungs at 4, 8, 16 and 32; the rule of the default before 2026-12-02,
# written out (docs/studies.md), with its first rung at 8 of 36 steps: rungs at 8, 16 and 32.
TRAINING = {"max_steps": 36, "eval_steps": 4, "save_steps": 36}
OLD_DEFAULT = {"type": "asha", "mode": "stop", "min_resource": 8, "reduction_factor": 2}


def study_file(folder, scheduler, n_trials):
    return write_study(
        folder,
        study={"n_trials": n_trials, "scheduler": scheduler, "sampler": {"type": "random", "seed": 0}},
        training=TRAINING,
        resources={"heartbeat_interval": 1, "grace_period": 3},
    )


def stored_rule(folder) -> dict | None:
    study = optuna.load_study(study_name="test", storage=f"sqlite:///{folder / 'out' / 'study.db'}")
    return study._storage.get_study_system_attrs(study._study_id).get(RULE_ATTR)  # noqa: SLF001 - no public read


def hpo_run(study, folder) -> subprocess.CompletedProcess:
    """`hpo run` as a user types it, in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "hpo.cli", "run", str(study)],
        capture_output=True,
        text=True,
        cwd=folder,
        timeout=300,
    )


def forget_rule(folder) -> None:
    """The study as a version of hpo before the rule was stored left it."""
    with sqlite3.connect(folder / "out" / "study.db") as db:
        db.execute("DELETE FROM study_system_attributes WHERE key = ?", (RULE_ATTR,))


@pytest.mark.slow  # 10 s on 2 cores: run by .ci/run's slow suite
def test_a_study_resumed_with_other_rungs_is_refused_and_with_its_own_goes_on(tmp_path):
    run_study(study_file(tmp_path, {"type": "asha"}, 4), workers=1, dry_run=False)
    assert stored_rule(tmp_path) == {
        "rungs": "stop",
        "first_fraction": 0.0,
        "reduction_factor": 2,
        "keep": "ranked",
    }
    changed = study_file(tmp_path, {"type": "asha", "keep": 0.5}, 6)
    with pytest.raises(ConfigError) as refused:
        run_study(changed, workers=1, dry_run=False)
    message = str(refused.value)
    assert refused.value.exit_code == 2 and "\n" not in message
    assert message.startswith("study.scheduler: the stored study 'test'")
    assert "keep ranked; the file now gives" in message and message.rstrip().endswith(
        "keep 0.5. Give the rungs the study began with, or use another study.name or --storage"
    )
    assert len(trials(tmp_path)) == 4  # nothing ran under the changed rule
    run_study(study_file(tmp_path, {"type": "asha"}, 6), workers=1, dry_run=False)
    assert len(trials(tmp_path)) == 6


def test_a_rule_changed_before_any_rung_was_recorded_is_taken(tmp_path):
    open_study(load_study_spec(study_file(tmp_path, {"type": "asha"}, 2)))  # created, no trial has run
    assert stored_rule(tmp_path)["keep"] == "ranked"
    run_study(study_file(tmp_path, {"type": "asha", "keep": 0.5}, 2), workers=1, dry_run=False)
    assert stored_rule(tmp_path)["keep"] == 0.5


@pytest.mark.slow  # 10 s on 2 cores: run by .ci/run's slow suite
def test_a_study_begun_under_the_old_default_rungs_is_refused_by_the_cli_in_one_line(tmp_path):
    run_study(study_file(tmp_path, OLD_DEFAULT, 5), workers=1, dry_run=False)
    recorded = [t for t in trials(tmp_path) if "completed_rung_0" in t.system_attrs]
    assert len(recorded) == 5 and all(
        t.system_attrs["completed_rung_0"] == t.intermediate_values[8] for t in recorded
    )
    forget_rule(tmp_path)
    assert stored_rule(tmp_path) is None
    upgraded = study_file(tmp_path, {"type": "asha"}, 8)
    done = hpo_run(upgraded, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert (
        len(lines) == 1 and "recorded its rung values at other steps than stop-type rungs from 0" in lines[0]
    )
    assert "before 2026-12-02: scheduler: {type: asha, mode: stop, min_resource: <a ninth" in lines[0]
    assert len(trials(tmp_path)) == 5


@pytest.mark.slow  # 9 s on 2 cores: run by .ci/run's slow suite
def test_a_study_begun_before_the_rule_was_stored_goes_on_under_the_same_rungs(tmp_path):
    run_study(study_file(tmp_path, OLD_DEFAULT, 4), workers=1, dry_run=False)
    forget_rule(tmp_path)
    run_study(study_file(tmp_path, OLD_DEFAULT, 6), workers=1, dry_run=False)
    assert len(trials(tmp_path)) == 6
    assert stored_rule(tmp_path) == {
        "rungs": "stop",
        "first_fraction": 8 / 36,
        "reduction_factor": 2,
        "keep": 0.5,
    }


def test_optunas_successive_halving_resumed_with_another_min_resource_is_refused_naming_the_pruner(tmp_path):
    def halving(min_resource: int, n_trials: int):
        return write_study(
            tmp_path,
            study={
                "n_trials": n_trials,
                "pruner": {"type": "successive_halving", "min_resource": min_resource, "reduction_factor": 2},
                "sampler": {"type": "random", "seed": 0},
            },
            training=TRAINING,
        )

    run_study(halving(4, 3), workers=1, dry_run=False)
    assert stored_rule(tmp_path) == {
        "rungs": "successive_halving",
        "min_resource": 4,
        "reduction_factor": 2,
        "min_early_stopping_rate": None,
    }
    with pytest.raises(
        ConfigError,
        match=r"^study\.pruner: .* under Optuna's successive_halving pruner: "
        r"min_resource 4, reduction_factor 2, min_early_stopping_rate default; the file now gives "
        r"Optuna's successive_halving pruner: min_resource 8",
    ):
        run_study(halving(8, 5), workers=1, dry_run=False)
    assert len(trials(tmp_path)) == 3


def promotion(folder, min_resource: int, n_trials: int):
    scheduler = {"type": "asha", "mode": "promotion", "min_resource": min_resource, "reduction_factor": 3}
    return study_file(folder, scheduler, n_trials)


@pytest.mark.slow  # 10 s on 2 cores: run by .ci/run's slow suite
def test_a_promotion_study_resumed_with_moved_rungs_is_refused_and_with_its_own_goes_on(tmp_path):
    # rungs at steps 8 and 24 of 36; moved to 4 and 12 the paused trials would wait at levels that are no rung
    run_study(promotion(tmp_path, 8, 4), workers=1, dry_run=False)
    assert stored_rule(tmp_path) == {
        "rungs": "promotion",
        "resource": "steps",
        "levels": [8, 24],
        "reduction_factor": 3,
    }
    with pytest.raises(ConfigError) as refused:
        run_study(promotion(tmp_path, 4, 6), workers=1, dry_run=False)
    message = str(refused.value)
    assert refused.value.exit_code == 2 and "\n" not in message
    assert message.startswith("study.scheduler: the stored study 'test'")
    assert (
        "under promotion-type rungs at steps 8, 24, the top 1/3 promoted; the file now gives promotion-type rungs "
        "at steps 4, 12, the top 1/3 promoted." in message
    )
    assert len(trials(tmp_path)) == 4
    run_study(promotion(tmp_path, 8, 6), workers=1, dry_run=False)
    assert len(trials(tmp_path)) == 6


@pytest.mark.slow  # 13 s on 2 cores: run by .ci/run's slow suite
def test_a_promotion_study_begun_before_the_rule_was_stored_is_checked_by_where_it_paused(tmp_path):
    run_study(promotion(tmp_path, 8, 4), workers=1, dry_run=False)
    forget_rule(tmp_path)
    moved = promotion(tmp_path, 12, 6)  # one rung at 12: the trials recorded values at 8 (and 24)
    done = hpo_run(moved, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "recorded rung values at steps 8" in lines[0]
    assert "where the file puts no rung (promotion-type rungs at steps 12, the top 1/3 promoted)" in lines[0]
    assert len(trials(tmp_path)) == 4
    run_study(promotion(tmp_path, 8, 6), workers=1, dry_run=False)  # the rungs it began with: on it goes
    assert len(trials(tmp_path)) == 6 and stored_rule(tmp_path)["levels"] == [8, 24]


def pbt(folder, interval: int, max_resource: int = 8):
    """Two members, scored at every `interval` steps up to `max_resource`."""
    scheduler = {
        "type": "pbt",
        "population": 2,
        "perturbation_interval": interval,
        "max_resource": max_resource,
        "quantile_fraction": 0.5,
        "resample_probability": 0.0,
        "mutations": {"learning_rate": {"factors": [0.5, 2.0]}},
    }
    return write_study(
        folder,
        study={"n_trials": 2, "scheduler": scheduler, "sampler": {"type": "random", "seed": 0}},
        training={"max_steps": None, "lr_scheduler_type": "linear"},
        search_space={"learning_rate": {"type": "float", "low": 1.0e-4, "high": 0.5, "log": True}},
        resources={"heartbeat_interval": 1, "grace_period": 3},
    )


@pytest.mark.slow  # 17 s on 2 cores: run by .ci/run's slow suite
def test_a_pbt_study_resumed_with_another_interval_is_refused_in_one_line_and_with_its_own_goes_on(tmp_path):
    # members scored at 4 (and complete at 8); with an interval of 8 the file's intervals would be 8 and 16
    run_study(pbt(tmp_path, 4), workers=1, dry_run=False)
    assert stored_rule(tmp_path) == {"rungs": "pbt", "perturbation_interval": 4, "max_resource": 8}
    assert {tuple(sorted(t.intermediate_values)) for t in trials(tmp_path)} == {(4,)}
    done = hpo_run(pbt(tmp_path, 8, max_resource=16), tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "study.scheduler: the stored study 'test'" in lines[0]
    assert (
        "under PBT intervals every 4 steps to 8; the file now gives PBT intervals every 8 steps to 16"
        in lines[0]
    )
    forget_rule(
        tmp_path
    )  # as a version of hpo before the rule was stored left it: checked by where members scored
    done = hpo_run(pbt(tmp_path, 8, max_resource=16), tmp_path)
    assert (
        done.returncode == 2
        and "scored its members at steps 4, where the file puts no interval" in done.stderr
    )
    assert (
        hpo_run(pbt(tmp_path, 4), tmp_path).returncode == 0
    )  # the intervals it began with: taken, and stored
    assert stored_rule(tmp_path)["perturbation_interval"] == 4
