"""`study.scheduler: {type: asha, ...}`: what a study file may say, and the one-line refusals."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from test_spec_study import problem, study

from hpo.scheduling.promotion import AshaPlan
from hpo.spec import parse_study_spec
from hpo.spec.scheduler import rung_levels
from hpo.storage.stop_rungs import StopRungsPruner
from hpo.storage.study_db import build_pruner

ASHA = {"type": "asha", "min_resource": 1, "reduction_factor": 3}


def test_max_resource_comes_from_the_training_length_and_the_pruner_is_off():
    data = study(**{"study.scheduler": ASHA, "training.num_train_epochs": None, "training.max_steps": 20})
    spec = parse_study_spec(data)
    assert (spec.study.scheduler.resource, spec.study.scheduler.max_resource) == ("steps", 20)
    assert spec.study.pruner.type == "none"  # a scheduler, not a pruner, decides which trials go on
    spec = parse_study_spec(study(**{"study.scheduler": {**ASHA, "resource": "epochs"}}))
    assert spec.study.scheduler.max_resource == 2  # training.num_train_epochs


def test_max_resource_sets_the_training_length():
    data = study(**{"study.scheduler": {**ASHA, "max_resource": 27}, "training.num_train_epochs": None})
    spec = parse_study_spec(data)
    assert spec.training["max_steps"] == 27  # the lr schedule is laid out for the full length from the start
    assert spec.training_arguments("out").max_steps == 27


@pytest.mark.parametrize(
    ("resource", "length", "evaluation", "levels"),
    [
        # the first evaluation at or past a ninth of the length: 100 steps of 900 -> the evaluation at 135
        ("steps", 900, {"eval_strategy": "steps", "eval_steps": 45}, (135,)),  # one rung, not 135, 405
        ("steps", 48, {"eval_strategy": "steps", "eval_steps": 0.125}, (6,)),  # a fraction of the length
        (
            "steps",
            48,
            {"eval_strategy": "steps", "logging_steps": 12},
            (12,),
        ),  # eval_steps defaults to logging's
        ("epochs", 20, {"eval_strategy": "epoch"}, (3,)),  # the third epoch: 20 / 9 rounded up
        ("epochs", 3, {"eval_strategy": "epoch"}, (1,)),
        ("steps", 900, {"eval_strategy": "epoch"}, (100,)),  # no cadence in steps: the ninth itself
        ("steps", 900, {"eval_strategy": "no"}, (100,)),
        (
            "steps",
            450,
            {"eval_strategy": "steps", "eval_steps": 500},
            (50,),
        ),  # the first evaluation past the end
    ],
)
def test_promotion_without_min_resource_has_one_rung_at_the_first_evaluation_past_a_ninth(
    resource, length, evaluation, levels
):
    scheduler = {"type": "asha", "mode": "promotion", "resource": resource, "max_resource": length}
    changes = {f"training.{key}": value for key, value in evaluation.items()}
    data = study(**{"study.scheduler": scheduler, "training.num_train_epochs": None, **changes})
    plan = AshaPlan.of(parse_study_spec(data))
    assert plan is not None and plan.levels == levels


@pytest.mark.parametrize(
    ("training", "resource", "levels"),
    [
        (
            {"num_train_epochs": 20, "eval_strategy": "epoch"},
            "epochs",
            (3,),
        ),  # the length in epochs: count in epochs
        ({"num_train_epochs": 20, "eval_strategy": "steps", "eval_steps": 5}, "epochs", (3,)),
        (
            {"num_train_epochs": 20, "max_steps": 900, "eval_steps": 45, "eval_strategy": "steps"},
            "steps",
            (135,),
        ),
    ],
)
def test_asha_counts_in_the_unit_the_study_length_is_given_in(training, resource, levels):
    data = study(**{"study.scheduler": {"type": "asha", "mode": "promotion"}, "training": training})
    spec = parse_study_spec(data)
    scheduler = spec.study.scheduler
    assert scheduler.resource == resource
    assert scheduler.max_resource == (20 if resource == "epochs" else 900)
    plan = AshaPlan.of(spec)
    assert plan is not None and plan.levels == levels and plan.resource == resource
    as_written = parse_study_spec(study(**{"study.scheduler": {"type": "asha"}, "training": training}))
    assert (
        as_written.study.scheduler.max_resource == scheduler.max_resource
    )  # stop-type: valid as written too


@pytest.mark.parametrize(
    ("scheduler", "training", "mode", "eta", "fraction", "keep"),
    [
        # as written: stop-type rungs from the first evaluation, eta 2, the share kept as the rung ranks
        ({"type": "asha"}, {}, "stop", 2, 0, "ranked"),
        ({"type": "asha", "keep": "ranked", "reduction_factor": 3}, {}, "stop", 3, 0, "ranked"),
        (
            {"type": "asha", "reduction_factor": 3},
            {},
            "stop",
            3,
            0,
            1 / 3,
        ),  # by hand: successive halving's share
        ({"type": "asha", "mode": "stop", "min_resource": 4}, {}, "stop", 2, 4 / 36, 1 / 2),
        ({"type": "asha", "keep": 0.5}, {}, "stop", 2, 0, 0.5),  # a setting only stopping has
        ({"type": "asha", "min_resource": 4}, {}, "promotion", 3, None, None),  # a file written for promotion
        ({"type": "asha", "max_rungs": 1}, {}, "promotion", 3, None, None),
        ({"type": "asha", "continue_in_place": False}, {}, "promotion", 3, None, None),
        ({"type": "asha"}, {"eval_strategy": "no"}, "promotion", 3, None, None),  # a promotion rung evaluates
        ({"type": "asha", "startup_trials": 3}, {}, "stop", 2, 0, "ranked"),  # a setting only stopping has
    ],
)
def test_the_mode_follows_what_the_section_gives(scheduler, training, mode, eta, fraction, keep):
    changes = {f"training.{key}": value for key, value in {"max_steps": 36, **training}.items()}
    spec = parse_study_spec(
        study(**{"study.scheduler": scheduler, "training.num_train_epochs": None, **changes})
    )
    settled = spec.study.scheduler
    assert (settled.mode, settled.reduction_factor) == (mode, eta)
    assert spec.stops_at_rungs() == (mode == "stop") and spec.pauses_trials() == (mode == "promotion")
    assert (AshaPlan.of(spec) is None) == (mode == "stop")
    pruner = build_pruner(spec)
    if fraction is None:
        assert not isinstance(pruner, StopRungsPruner)
    else:
        assert isinstance(pruner, StopRungsPruner) and pruner.first_fraction == pytest.approx(fraction)
        assert pruner.reduction_factor == eta and pruner.ranked == (keep == "ranked")
        assert keep == "ranked" or pruner.keep == pytest.approx(keep)
        assert pruner.startup_trials == scheduler.get("startup_trials", 0)


def test_a_resource_given_is_kept_whatever_the_length_unit():
    data = study(
        **{"study.scheduler": {"type": "asha", "resource": "steps"}, "training.num_train_epochs": 20}
    )
    found, message = problem(data)
    assert found == "study.scheduler.max_resource" and "training.max_steps gives no whole length" in message


def test_max_rungs_keeps_the_lowest_rungs():
    scheduler = {**ASHA, "max_resource": 27, "max_rungs": 2}
    plan = AshaPlan.of(
        parse_study_spec(study(**{"study.scheduler": scheduler, "training.num_train_epochs": None}))
    )
    assert plan is not None and plan.levels == (1, 3)  # not 9
    assert rung_levels(1, 27, 3) == [1, 3, 9]


@pytest.mark.parametrize(
    ("given", "gate"),
    [
        ({"mode": "promotion"}, (2, -1.0)),  # the default rung: it judges once two trials have run to the end
        ({"min_resource": 1}, None),  # rungs chosen by hand judge from the first trial
        ({"min_resource": 1, "rank_gate": True}, (8, 0.7)),
        ({"rank_gate": True}, (8, 0.7)),  # the correlation gate on the default rung
        ({"rank_gate": False}, None),
        ({"rank_gate": {"min_pairs": 5}}, (5, 0.7)),
        ({"rank_gate": {"min_pairs": 4, "min_correlation": 0.9}}, (4, 0.9)),
    ],
)
def test_the_default_rung_waits_for_two_finished_trials_and_rungs_given_judge_at_once(given, gate):
    data = study(**{"study.scheduler": {"type": "asha", **given}, "training.max_steps": 30})
    plan = AshaPlan.of(parse_study_spec(data))
    assert plan is not None
    assert (None if plan.gate is None else (plan.gate.min_pairs, plan.gate.min_correlation)) == gate


def test_a_one_epoch_training_is_refused_with_the_fix():
    data = study(
        **{
            "study.scheduler": {"type": "asha", "mode": "promotion", "resource": "epochs"},
            "training.num_train_epochs": 1,
        }
    )
    found, message = problem(data)
    assert found == "study.scheduler.max_resource" and "resource: steps" in message


@pytest.mark.parametrize(
    ("changes", "path", "text"),
    [
        (
            {"study.scheduler": ASHA, "study.pruner": {"type": "median"}},
            "study.pruner",
            "scheduler already decides which trials go on; remove study.pruner",
        ),
        (
            {"study.scheduler": {**ASHA, "max_resource": 9}, "training.max_steps": 12},
            "study.scheduler.max_resource",
            "training.max_steps is 12",
        ),
        (
            {"study.scheduler": {**ASHA, "min_resource": 9, "max_resource": 9}},
            "study.scheduler.min_resource",
            "must be below max_resource",
        ),
        (
            {"study.scheduler": {**ASHA, "resource": "epochs"}, "training.max_steps": 100},
            "study.scheduler.resource",
            "remove training.max_steps",
        ),
        ({"study.scheduler": {**ASHA, "reduction_factor": 1}}, "study.scheduler.reduction_factor", "2"),
        ({"study.scheduler": {**ASHA, "kind": "x"}}, "study.scheduler.kind", ""),
        (
            {"study.scheduler": ASHA, "study.metric": None, "study.metrics": ["accuracy", "loss"]},
            "study.scheduler",
            "several",
        ),
        (
            {"study.scheduler": ASHA, "training.num_train_epochs": None},
            "study.scheduler.max_resource",
            "set max_resource",
        ),
        (
            {"study.scheduler": {"type": "asha", "mode": "stop", "max_rungs": 2}},
            "study.scheduler.max_rungs",
            "mode is stop; set mode: promotion, or remove it",
        ),
        (
            {"study.scheduler": {"type": "asha", "mode": "promotion", "startup_trials": 2}},
            "study.scheduler.startup_trials",
            "is a setting of mode stop (stopping trials at their rungs), but this scheduler pauses them",
        ),
        (
            {"study.scheduler": {"type": "asha", "mode": "promotion", "keep": 0.5}},
            "study.scheduler.keep",
            "is a setting of mode stop (stopping trials at their rungs), but this scheduler pauses them",
        ),
        (
            {"study.scheduler": {"type": "asha", "keep": 1.5}},
            "study.scheduler.keep",
            "less than 1, or ranked (got 1.5)",
        ),
        (
            {"study.scheduler": {"type": "asha", "keep": "half"}},
            "study.scheduler.keep",
            "must be a share between 0 and 1, or ranked (got 'half')",
        ),
        (  # a setting of each mode: the stop one decides, the other is refused
            {"study.scheduler": {"type": "asha", "max_rungs": 1, "startup_trials": 2}},
            "study.scheduler.max_rungs",
            "mode is stop; set mode: promotion, or remove it",
        ),
        (
            {"study.scheduler": {"type": "asha", "startup_trials": 2}, "training.eval_strategy": "no"},
            "study.scheduler.mode",
            "set training.eval_strategy: epoch",
        ),
        (
            {"study.scheduler": {"type": "asha", "mode": "stop"}, "training.eval_strategy": "no"},
            "study.scheduler.mode",
            "set training.eval_strategy: epoch",
        ),
        (
            {"study.scheduler": {"type": "asha", "mode": "fast"}},
            "study.scheduler.mode",
            "stop",
        ),
        (
            {"study.scheduler": {**ASHA, "rank_gate": {"min_pairs": 1}}},
            "study.scheduler.rank_gate.min_pairs",
            "2",
        ),
        (
            {"study.scheduler": {**ASHA, "rank_gate": {"min_correlation": 1.5}}},
            "study.scheduler.rank_gate.min_correlation",
            "1",
        ),
    ],
)
def test_refusals_name_the_field(changes, path, text):
    found, message = problem(study(**changes))
    assert found == path, message
    assert text in message


def test_hpo_validate_refuses_pruner_and_scheduler_in_one_line_with_exit_2(tmp_path):
    data = study(**{"study.scheduler": ASHA, "study.pruner": {"type": "hyperband"}})
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(data))
    result = subprocess.run(
        [sys.executable, "-m", "hpo.cli", "validate", str(tmp_path / "study.yaml")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    lines = [line for line in result.stderr.strip().splitlines() if "study.pruner" in line]
    assert len(lines) == 1 and "remove study.pruner" in lines[0]


@pytest.mark.parametrize(
    ("changes", "pruning"),
    [
        ({}, "asha stop-type rungs"),  # evaluates, one objective: what `scheduler: {type: asha}` runs
        ({"training.eval_strategy": "no"}, "none"),  # nothing to judge during training
        ({"study.metric": None, "study.metrics": ["accuracy", "loss"]}, "none"),  # Optuna cannot prune these
        ({"training.num_train_epochs": 2.5}, "median"),  # no whole length: Optuna's median pruner, as before
        ({"study.pruner": {"type": "median"}}, "median"),  # a pruner named is kept
    ],
)
def test_a_study_that_names_no_pruner_gets_the_stop_type_rungs(changes, pruning):
    spec = parse_study_spec(study(**changes))
    assert spec.pruning_label() == pruning
    assert (spec.study.scheduler is not None) == (pruning == "asha stop-type rungs")
    if spec.stops_at_rungs():
        pruner = build_pruner(spec)
        assert isinstance(pruner, StopRungsPruner) and spec.study.scheduler.resource == "epochs"
        assert pruner.startup_trials == 2  # no trial stopped before two have completed
