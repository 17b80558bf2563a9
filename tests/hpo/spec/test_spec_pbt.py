"""`study.scheduler: {type: pbt}` through `hpo validate` and `hpo run`: a valid population is described; a mutation of a
hyperparameter that cannot change mid-run is refused (exit 2) with the list of what can."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from study_task import write_study

from hpo.cli import main
from hpo.spec import load_study_spec

PBT = {
    "type": "pbt",
    "population": 4,
    "perturbation_interval": 4,
    "max_resource": 12,
    "mutations": {"learning_rate": {"factors": [0.8, 1.2]}},
}
SPACE = {
    "learning_rate": {"type": "float", "low": 1.0e-4, "high": 0.1, "log": True},
    "hidden": {"type": "int", "low": 8, "high": 32},
    "dropout": {"type": "float", "low": 0.0, "high": 0.5},
    "weight_decay": {"type": "float", "low": 0.0, "high": 0.1},
}


def _cli(args: list[str], capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out + captured.err


def _study(tmp_path: Path, scheduler: dict[str, Any], **sections: Any) -> Path:
    sections.setdefault("search_space", SPACE)
    return write_study(tmp_path, study={"n_trials": 4, "scheduler": scheduler}, **sections)


def test_a_pbt_study_validates_and_is_described(tmp_path, capsys):
    code, out = _cli(["validate", str(_study(tmp_path, PBT))], capsys)
    assert code == 0, out
    assert "scheduler: pbt, population 4, exploit/explore every 4 steps up to 12" in out
    assert "mutating learning_rate (x0.8/1.2)" in out
    assert "pruner: none" in out  # the scheduler decides who continues; no median pruner is added


@pytest.mark.parametrize("command", ["validate", "run"])
def test_an_immutable_mutation_is_refused_listing_what_can_mutate(tmp_path, capsys, command):
    scheduler = {**PBT, "mutations": {"hidden": {"factors": [0.8, 1.2]}}}
    code, out = _cli([command, str(_study(tmp_path, scheduler))], capsys)
    assert code == 2
    assert "study.scheduler.mutations.hidden: hidden cannot change in the middle of a run" in out
    assert "learning_rate, weight_decay, adam_beta1, adam_beta2, adam_epsilon" in out
    assert not (tmp_path / "out" / "study.db").exists()  # refused before the study started


def test_dropout_mutates_only_where_the_task_exposes_it(tmp_path, capsys):
    scheduler = {**PBT, "mutations": {"dropout": {"resample": True}}}
    code, out = _cli(["validate", str(_study(tmp_path / "a", scheduler)), "--no-dry-run"], capsys)
    assert code == 2 and "dropout cannot change in the middle of a run" in out
    assert "task.mutable" in out  # the message says how a task exposes it
    task = {
        "model_init": "study_task:model_init",
        "data": "study_task:data",
        "compute_metrics": "study_task:compute_metrics",
        "mutable": {"dropout": "study_task:set_dropout"},
    }
    code, out = _cli(["validate", str(_study(tmp_path / "b", scheduler, task=task))], capsys)
    assert code == 0, out
    assert "mutating dropout (resample)" in out


@pytest.mark.parametrize(
    ("scheduler", "sections", "message"),
    [
        (
            {**PBT, "mutations": {"momentum": {"factors": [0.8]}}},
            {},
            "study.scheduler.mutations.momentum: not a parameter of search_space",
        ),
        (
            {**PBT, "mutations": {"weight_decay": {"factors": [0.8, 1.2]}}},
            {},
            "search_space.weight_decay.low: must be > 0 for PBT",
        ),
        (
            {**PBT, "mutations": {"learning_rate": {}}},
            {},
            "study.scheduler.mutations.learning_rate: give factors: [0.8, 1.2] (perturb) or resample: true",
        ),
        ({**PBT, "population": 1}, {}, "study.scheduler.population: must be greater than or equal to 2"),
        (
            {**PBT, "max_resource": 2},
            {},
            "study.scheduler.max_resource: must be a multiple of perturbation_interval",
        ),
        (
            {**PBT, "max_resource": 10},
            {},
            "study.scheduler.max_resource: must be a multiple of perturbation_interval",
        ),
        (PBT, {"training": {"save_total_limit": 1}}, "training.save_total_limit: PBT keeps the checkpoints"),
        (PBT, {"training": {"eval_steps": 3}}, "training.eval_steps: a PBT member is scored and saved every"),
        (
            PBT,
            {"training": {"max_steps": 30}},
            "training.max_steps: is 30 but study.scheduler.max_resource is 12",
        ),
    ],
)
def test_pbt_refusals_name_the_field_and_the_fix(tmp_path, capsys, scheduler, sections, message):
    path = _study(tmp_path, scheduler, **sections)
    code, out = _cli(["validate", str(path), "--no-dry-run"], capsys)
    assert code == 2
    assert message in out


def test_pbt_refuses_an_explicit_pruner(tmp_path, capsys):
    path = write_study(
        tmp_path,
        study={"n_trials": 4, "scheduler": PBT, "pruner": {"type": "median"}},
        search_space=SPACE,
    )
    code, out = _cli(["validate", str(path), "--no-dry-run"], capsys)
    assert code == 2 and "study.pruner: the pbt scheduler already decides which trials go on" in out


def test_members_train_max_resource_steps_scored_and_saved_at_every_interval(tmp_path):
    path = write_study(
        tmp_path, study={"scheduler": {**PBT, "max_resource": 24}}, training={"max_steps": None}
    )
    spec = load_study_spec(str(path))
    assert spec.training["max_steps"] == 24
    assert (spec.training["eval_steps"], spec.training["save_steps"]) == (4, 4)
    assert spec.study.objective == "last"  # the member's value is its score at max_resource
    assert spec.study.scheduler.intervals() == [4, 8, 12, 16, 20, 24]


def test_pbt_runs_in_worker_processes_only(tmp_path, capsys):
    code, out = _cli(["run", str(_study(tmp_path, PBT)), "--in-process"], capsys)
    assert code == 2 and "study.scheduler: pbt pauses trials and resumes them in worker processes" in out
