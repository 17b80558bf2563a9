"""`--set key=value`: YAML values at dotted paths, applied before validation."""

from __future__ import annotations

import pytest
import yaml

from hpo.errors import ConfigError
from hpo.spec import load_run_spec
from hpo.spec.overrides import apply_overrides, parse_overrides

BASE = {"training": {"learning_rate": 0.1}, "study": {"enqueue": [{"lr": 0.1}, {"lr": 0.2}]}}


def test_values_are_parsed_as_yaml():
    result = apply_overrides(
        BASE,
        [
            "training.learning_rate=3e-4",
            "training.bf16=true",
            "training.report_to=[wandb]",
            "model.layers={a: 1}",
            "training.run_name=null",
            "name=plain text",
        ],
    )
    assert result["training"] == {
        "learning_rate": 3e-4,
        "bf16": True,
        "report_to": ["wandb"],
        "run_name": None,
    }
    assert result["model"] == {"layers": {"a": 1}}
    assert result["name"] == "plain text"


def test_list_items_are_addressed_by_index():
    result = apply_overrides(BASE, ["study.enqueue.1.lr=0.5"])
    assert result["study"]["enqueue"] == [{"lr": 0.1}, {"lr": 0.5}]


def test_the_original_mapping_is_not_changed():
    apply_overrides(BASE, ["training.learning_rate=1"])
    assert BASE["training"]["learning_rate"] == 0.1


def test_missing_equals_sign():
    with pytest.raises(ConfigError, match=r"--set 'training\.learning_rate': expected key=value"):
        parse_overrides(["training.learning_rate"])


def test_empty_path_segment():
    with pytest.raises(ConfigError, match="not a dotted path"):
        parse_overrides(["training..lr=1"])


def test_value_that_is_not_yaml_names_the_key():
    with pytest.raises(ConfigError, match=r"--set training\.report_to: not valid YAML"):
        parse_overrides(["training.report_to=[a,"])


def test_path_through_a_scalar_names_the_key():
    with pytest.raises(ConfigError, match=r"training\.learning_rate is 0\.1, not a mapping"):
        apply_overrides(BASE, ["training.learning_rate.x=1"])


def test_list_index_out_of_range():
    with pytest.raises(ConfigError, match=r"study\.enqueue\.5 must be an index into a list of 2 items"):
        apply_overrides(BASE, ["study.enqueue.5.lr=1"])


def test_misspelt_override_is_reported_by_the_schema(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(
        yaml.safe_dump(
            {"task": {"model_init": "studies.tasks.digits:model_init", "data": "studies.tasks.digits:data"}}
        )
    )
    with pytest.raises(
        ConfigError, match=r"training\.lerning_rate: unknown field \(did you mean learning_rate\?\)"
    ):
        load_run_spec(path, overrides=["training.lerning_rate=1e-3"])
    spec = load_run_spec(path, overrides=["training.learning_rate=1e-3", "model.hidden_size=64"])
    assert spec.training_arguments().learning_rate == 1e-3 and spec.model == {"hidden_size": 64}
