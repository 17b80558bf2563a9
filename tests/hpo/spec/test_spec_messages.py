"""Refusals of a file speak the file's words: field paths and YAML shapes (a mapping, a list), never the names of the
pydantic classes behind them; and an optional section written as `true` means that section with its defaults."""

from __future__ import annotations

import pydantic
import pytest
from test_spec_study import study

from hpo.spec import SpecError, parse_study_spec
from hpo.spec.base import Section


def _section_classes() -> set[str]:
    found, todo = set(), [Section]
    while todo:
        cls = todo.pop()
        found.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return found | {"BaseModel", pydantic.BaseModel.__name__}


def _problems(data: dict) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as caught:
        parse_study_spec(data, source="study.yaml")
    return caught.value.problems


def test_wandb_true_means_wandb_with_its_defaults():
    spec = parse_study_spec(study(**{"tracking.wandb": True}))
    assert spec.tracking.wandb is not None and spec.tracking.wandb.project is None
    assert parse_study_spec(study(**{"tracking.wandb": False})).tracking.wandb is None


def test_early_stopping_true_means_its_defaults():
    spec = parse_study_spec(study(callbacks=[{"early_stopping": True}]))
    assert spec.callbacks[0].early_stopping.patience == 1


@pytest.mark.parametrize(
    ("changes", "path", "expected"),
    [
        ({"tracking.wandb": 3}, "tracking.wandb", "must be true (wandb with its defaults) or a mapping"),
        (
            {"tracking": [1]},
            "tracking",
            "must be a mapping with the fields store, wandb, tensorboard, mlflow (got a list)",
        ),
        (
            {"study.pruner": 5},
            "study.pruner",
            "must be a mapping with the fields type, options, wrapped (got 5)",
        ),
        ({"study.sampler": "tpe"}, "study.sampler", "must be a mapping with the fields type"),
        ({"search_space.lr": 3}, "search_space.lr", "must be a mapping with the fields type"),
        ({"callbacks": {"early_stopping": {}}}, "callbacks", "must be a list (got a mapping)"),
        ({"training": 3}, "training", "must be a mapping (got 3)"),
    ],
)
def test_refusals_name_yaml_shapes_not_model_classes(changes, path, expected):
    (problem,) = _problems(study(**changes))
    assert problem[0] == path
    assert expected in problem[1], problem
    assert not [name for name in _section_classes() if name in problem[1]], problem


@pytest.mark.parametrize(
    ("changes", "path", "expected"),
    [
        ({"study.n_trials": "many"}, "study.n_trials", "must be a whole number (got 'many')"),
        ({"training.learning_rate": "fast"}, "training.learning_rate", "must be a number (got 'fast')"),
        # `low: int | float`: pydantic fails it once per member (low.int, low.float); the file's author sees one line
        (
            {"search_space.learning_rate.low": "abc"},
            "search_space.learning_rate.low",
            "must be a number (got 'abc')",
        ),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_in_the_files_words(changes, path, expected):
    # pydantic says "a valid integer, unable to parse string as an integer": one plain phrase, in good English
    assert _problems(study(**changes)) == [(path, expected)]
