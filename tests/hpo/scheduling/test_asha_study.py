"""Promotion-type ASHA on a real study: trials pause at their rungs (or go on in place when the rule promotes them at once), the promising ones are resumed later from their
checkpoints, and a promoted trial ends with the same weights as the same configuration trained straight through."""

from __future__ import annotations

import pytest
import safetensors.torch
import torch
import yaml
from optuna.trial import TrialState
from scheduler_support import trials
from study_task import write_study

from hpo.scheduling.promotion import IN_PLACE
from hpo.scheduling.rung_view import rung_rows
from hpo.spec import load_study_spec
from hpo.storage import pause
from hpo.storage.study_db import build_sampler, load_existing_study
from hpo.study import run_study
from hpo.tracking.store import open_store

ASHA = {"type": "asha", "min_resource": 4, "max_resource": 16, "reduction_factor": 2}
TRAINING = {"max_steps": 16, "learning_rate": 0.01, "lr_scheduler_type": "linear"}


def asha_study(folder, n_trials=10, **sections):
    study = {"n_trials": n_trials, "scheduler": ASHA, "sampler": {"type": "random", "seed": 0}}
    return write_study(
        folder,
        study={**study, "keep_checkpoints": {"top_k": None}, **sections.pop("study", {})},
        training={**TRAINING, **sections.pop("training", {})},
        resources={"heartbeat_interval": 1, "grace_period": 3, **sections.pop("resources", {})},
        **sections,
    )


def final_weights(run_dir):
    return safetensors.torch.load_file(run_dir / "checkpoint-16" / "model.safetensors")


def test_trials_pause_and_the_promoted_ones_end_bitwise_equal_to_a_straight_run(tmp_path):
    # One worker: the order of arrivals at the rungs, so which trials pause and which are resumed, is fixed. One thread
    # and the CPU in both runs (the straight one runs in this process): same reductions, so bitwise equal on any machine.
    # The paper's rule (nothing promoted below eta trials): with these seeds, a trial that completes was resumed.
    same_arithmetic = {"resources": {"threads_per_trial": 1}, "training": {"use_cpu": True}}
    paper = {"scheduler": {**ASHA, "promote_underfilled": False}}
    run_study(asha_study(tmp_path / "asha", study=paper, **same_arithmetic), workers=1, dry_run=False)
    found = trials(tmp_path / "asha")
    assert len(found) == 10  # n_trials counts configurations, not promotions
    assert {t.state for t in found} <= {TrialState.COMPLETE, TrialState.PRUNED}  # nobody left paused
    resumed = [t for t in found if t.system_attrs.get(pause.RESUMED_AT)]
    complete = [t for t in found if t.state == TrialState.COMPLETE]
    assert resumed and complete
    # Some trials were promoted the moment they reached a rung and trained on in place (no pause, no resume).
    assert any(len(pause.boundaries(t)) > len(t.system_attrs.get(pause.RESUMED_AT) or []) for t in complete)
    for trial in complete:
        assert trial.user_attrs["global_step"] == 16
    for trial in found:
        values = pause.boundaries(trial)
        if trial.state == TrialState.PRUNED:  # never promoted: PRUNED at its rung with its value there
            step = trial.user_attrs["pruned_step"]
            assert step in (4, 8) and trial.value == values[step]
            assert not list((tmp_path / "asha" / "out" / f"trial-{trial.number}").glob("checkpoint-*"))
        assert trial.intermediate_values == {k: v for k, v in values.items()}  # the sampler sees rung values
    # Each rung thins out. (Asynchronous promotion may promote more than n/eta over a run: a trial promoted early,
    # while its rung was small, keeps its promotion when later arrivals push it out of the top.)
    reached = [sum(step in pause.boundaries(t) for t in found) for step in (4, 8)]
    assert reached[0] == 10 and reached[0] > reached[1] > len(complete)

    promoted = next(t for t in complete if t.system_attrs.get(pause.RESUMED_AT))
    straight = tmp_path / "straight"
    path = write_study(
        straight,
        study={
            "n_trials": 1,
            "pruner": {"type": "none"},
            "enqueue": [dict(promoted.params)],
            "keep_checkpoints": {"top_k": None},
        },
        training={**TRAINING, **same_arithmetic["training"]},
        resources=same_arithmetic["resources"],
    )
    run_study(path, in_process=True, dry_run=False)
    expected = final_weights(straight / "out" / "trial-0")
    got = final_weights(tmp_path / "asha" / "out" / f"trial-{promoted.number}")
    assert expected.keys() == got.keys()
    for name, tensor in expected.items():
        assert torch.equal(tensor, got[name]), name


def test_the_spec_lays_the_schedule_out_for_max_resource(tmp_path):
    spec = load_study_spec(asha_study(tmp_path, training={"max_steps": None}))
    assert spec.training_arguments("x").max_steps == 16
    assert yaml.safe_load((tmp_path / "study.yaml").read_text())["study"]["scheduler"]["max_resource"] == 16


def test_a_paused_trial_ended_as_hopeless_shows_pruned_in_the_experiment_store(tmp_path):
    """Found by tests/chaos/campaign.py: a paused trial that ASHA ended PRUNED (it could no longer be promoted) stayed "paused"
    in the experiment store, where the dashboards and `hpo status` read it."""
    path = asha_study(tmp_path / "asha", n_trials=4, tracking={"store": True})
    run_study(path, workers=1, dry_run=False)
    pruned = [t for t in trials(tmp_path / "asha") if t.state == TrialState.PRUNED]
    assert pruned
    store = open_store(load_study_spec(path).store_url)
    for trial in pruned:
        run = store.run(f"test/trial-{trial.number}")
        assert run["status"] == "pruned", trial.number
        (event,) = store.events(f"test/trial-{trial.number}", kind="pruned")
        assert event["data"]["step"] == trial.user_attrs["pruned_step"]


@pytest.mark.slow  # 10 s on 2 cores: run by .ci/run's slow suite
def test_the_first_trial_goes_on_at_once_under_the_default_rule(tmp_path):
    # hpo's default (promote_underfilled): the first trial is the best at each rung it reaches, so it trains to the
    # full budget in place, with no pause and no resume; the paper's rule pauses it at the first rung (1 < eta).
    run_study(asha_study(tmp_path / "default", n_trials=4), workers=1, dry_run=False)
    first = min(trials(tmp_path / "default"), key=lambda t: t.number)
    assert first.state == TrialState.COMPLETE and first.user_attrs["global_step"] == 16
    assert sorted(pause.boundaries(first)) == [4, 8] and not first.system_attrs.get(pause.RESUMED_AT)

    paper = {"scheduler": {**ASHA, "promote_underfilled": False}}
    run_study(asha_study(tmp_path / "paper", n_trials=4, study=paper), workers=1, dry_run=False)
    first = min(trials(tmp_path / "paper"), key=lambda t: t.number)
    assert first.system_attrs.get(pause.RESUMED_AT) or first.user_attrs.get("pruned_step") == 4


def test_promotion_without_min_resource_has_one_rung_judging_after_two_finished_trials(tmp_path):
    # `scheduler: {type: asha, mode: promotion}` with the length from training.max_steps (15) and an evaluation every 4 steps: one rung,
    # at step 4 (not 4 and 12). The first two trials run through it unjudged; from then on the ones not promoted end
    # PRUNED at step 4, the others run to 15.
    run_study(
        asha_study(
            tmp_path,
            n_trials=8,
            study={"scheduler": {"type": "asha", "mode": "promotion"}},
            training={"max_steps": 15, "eval_steps": 4},
        ),
        workers=1,
        dry_run=False,
    )
    found = sorted(trials(tmp_path), key=lambda t: t.number)
    spec = load_study_spec(tmp_path / "study.yaml")
    study = load_existing_study(spec)
    assert rung_rows(study, spec)[0]["gate"].startswith("open: ")  # what `hpo status` shows
    assert len(found) == 8 and {t.state for t in found} == {TrialState.COMPLETE, TrialState.PRUNED}
    assert [t.state for t in found[:2]] == [TrialState.COMPLETE] * 2
    assert all(t.system_attrs.get(IN_PLACE) == [4] for t in found[:2])
    for trial in found:
        assert sorted(pause.boundaries(trial)) == [4]
        if trial.state == TrialState.PRUNED:
            assert trial.user_attrs["pruned_step"] == 4
        else:
            assert trial.user_attrs["global_step"] == 15


def test_promotion_runs_an_epochs_based_study_with_one_rung_at_the_first_epoch(tmp_path):
    # `scheduler: {type: asha, mode: promotion}` on a study that trains by num_train_epochs (issue 36: it was refused
    # with "max_resource is not given and training.max_steps gives no whole length"): the rung is the first epoch's
    # evaluation, and trials not promoted there end PRUNED after one epoch.
    path = asha_study(
        tmp_path,
        n_trials=6,
        study={"scheduler": {"type": "asha", "mode": "promotion"}},
        training={"max_steps": -1, "num_train_epochs": 3, "eval_strategy": "epoch", "save_strategy": "epoch"},
    )
    run_study(path, workers=1, dry_run=False)
    found = sorted(trials(tmp_path), key=lambda t: t.number)
    assert len(found) == 6 and {t.state for t in found} <= {TrialState.COMPLETE, TrialState.PRUNED}
    assert [t.state for t in found[:2]] == [TrialState.COMPLETE] * 2  # the gate: two finished trials first
    assert any(t.state == TrialState.PRUNED for t in found)
    epoch = min(t.user_attrs["pruned_step"] for t in found if t.state == TrialState.PRUNED)
    for trial in found:
        assert sorted(pause.boundaries(trial)) == [1]  # epoch 1, the only rung
        if trial.state == TrialState.PRUNED:
            assert trial.user_attrs["pruned_step"] == epoch  # stopped at the end of the first epoch
        else:
            assert trial.user_attrs["global_step"] == 3 * epoch  # the full three epochs


def test_the_correlation_gate_keeps_the_rung_from_judging_until_its_values_rank(tmp_path):
    # `rank_gate: true`: the rung judges once 8 completed trials show a rank correlation of 0.7 between their value
    # there and their final score. With 6 trials it never opens: every trial reports at the rung (step 4), trains on
    # without pausing and completes, as if promoted there.
    scheduler = {"type": "asha", "rank_gate": True}
    run_study(
        asha_study(
            tmp_path, n_trials=6, study={"scheduler": scheduler}, training={"max_steps": 15, "eval_steps": 4}
        ),
        workers=1,
        dry_run=False,
    )
    found = trials(tmp_path)
    assert len(found) == 6 and {t.state for t in found} == {TrialState.COMPLETE}
    for trial in found:
        assert sorted(pause.boundaries(trial)) == [4] and trial.user_attrs["global_step"] == 15
        assert not trial.system_attrs.get(pause.RESUMED_AT)  # never paused
        assert trial.system_attrs[IN_PLACE] == [4]
    spec = load_study_spec(tmp_path / "study.yaml")
    study = load_existing_study(spec)
    assert rung_rows(study, spec)[0]["gate"] == "closed: 6 of 8 pairs"


def test_tpe_under_asha_learns_from_paused_trials_in_a_real_run(tmp_path):
    # The study file's TPE becomes the multi-fidelity TPE (hpo.storage.rung_sampler) under ASHA: past its start-up
    # trials it models the rung values of paused trials, in the worker, on the study's SQLite file.
    sampler = {"type": "tpe", "seed": 0, "n_startup_trials": 2}
    run_study(asha_study(tmp_path, n_trials=6, study={"sampler": sampler}), workers=1, dry_run=False)
    found = trials(tmp_path)
    assert len(found) == 6 and {t.state for t in found} <= {TrialState.COMPLETE, TrialState.PRUNED}
    spec = load_study_spec(tmp_path / "study.yaml")
    assert type(build_sampler(spec)).__name__ == "RungTPESampler"
