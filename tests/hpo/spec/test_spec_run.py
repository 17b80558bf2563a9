"""Run files: what loads, the defaults a user relies on, and the message for each kind of mistake."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hpo.errors import ConfigError
from hpo.spec import RunSpec, SpecError, load_run_spec, load_spec, parse_run_spec

TASK = {
    "model_init": "studies.tasks.digits:model_init",
    "data": "studies.tasks.digits:data",
    "compute_metrics": "studies.tasks.digits:compute_metrics",
}


def write(tmp_path: Path, data: dict, name: str = "run.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def problems(data: dict) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as caught:
        parse_run_spec(data, source="run.yaml")
    return caught.value.problems


def test_minimal_run_file_gets_name_and_output_dir_from_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = load_run_spec(write(tmp_path, {"task": TASK}, "my_run.yaml"))
    assert spec.name == "my_run"
    assert spec.output_dir == str(tmp_path / "runs" / "my_run")
    assert spec.source.endswith("my_run.yaml")


def test_output_dir_from_command_line_wins(tmp_path):
    path = write(tmp_path, {"task": TASK, "output_dir": str(tmp_path / "a")})
    assert load_run_spec(path).output_dir == str(tmp_path / "a")
    assert load_run_spec(path, output_dir=tmp_path / "b").output_dir == str(tmp_path / "b")


def test_training_arguments_are_fresh_and_validated(tmp_path):
    spec = load_run_spec(
        write(tmp_path, {"task": TASK, "training": {"learning_rate": 3e-4, "num_train_epochs": 2}})
    )
    first, second = spec.training_arguments(), spec.training_arguments()
    assert first is not second
    assert first.learning_rate == 3e-4 and first.num_train_epochs == 2
    assert first.output_dir == spec.output_dir
    first.learning_rate = 1.0
    assert spec.training_arguments().learning_rate == 3e-4
    assert spec.training_arguments(learning_rate=0.5).learning_rate == 0.5


def test_yaml_floats_without_a_dot_are_floats(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(
        "task: {model_init: 'studies.tasks.digits:model_init', data: 'studies.tasks.digits:data'}\n"
        "training: {learning_rate: 3e-4, weight_decay: 1E-2}\n"
    )
    args = load_run_spec(path).training_arguments()
    assert args.learning_rate == pytest.approx(3e-4) and args.weight_decay == pytest.approx(1e-2)


def test_unknown_training_field_suggests_the_right_name():
    assert problems({"task": TASK, "training": {"lerning_rate": 1e-3}}) == [
        ("training.lerning_rate", "unknown field (did you mean learning_rate?)")
    ]


def test_unknown_top_level_field_suggests_the_right_name():
    [(path, message)] = problems({"task": TASK, "trainig": {}})
    assert path == "trainig" and "did you mean training?" in message


def test_wrong_type_names_the_field_and_the_type():
    [(path, message)] = problems({"task": TASK, "training": {"num_train_epochs": "ten"}})
    assert path == "training.num_train_epochs"
    assert message == "must be a number (got 'ten')"  # the file's words, not Python's type name


def test_out_of_range_value_names_the_field():
    [(path, message)] = problems({"task": TASK, "training": {"learning_rate": -1.0}})
    assert path == "training.learning_rate" and ">= 0" in message


def test_combination_error_names_a_field_the_user_set():
    [(path, message)] = problems({"task": TASK, "training": {"load_best_model_at_end": True}})
    assert path == "training.load_best_model_at_end" and "eval_strategy" in message


def test_output_dir_under_training_points_to_the_top_level():
    [(path, message)] = problems({"task": TASK, "training": {"output_dir": "x"}})
    assert path == "training.output_dir" and "top of a run file" in message


def test_missing_task_function_is_required():
    [(path, message)] = problems({"task": {"model_init": "studies.tasks.digits:model_init"}})
    assert (path, message) == ("task.data", "required field is missing")


def test_import_path_needs_a_colon():
    [(path, message)] = problems({"task": {**TASK, "data": "studies.tasks.digits.data"}})
    assert path == "task.data" and "studies.tasks.digits:data" in message


def test_several_problems_are_reported_together():
    found = problems(
        {"task": TASK, "training": {"learning_rate": 1}, "modle": {}, "tracking": {"stor": True}}
    )
    assert {path for path, _ in found} == {"modle", "tracking.stor"}


def test_study_sections_in_a_run_file_say_which_command_runs_them():
    [(path, message)] = problems({"task": TASK, "search_space": {}})
    assert path == "search_space" and "hpo run" in message


def test_tracking_wandb_mode_is_a_closed_set():
    [(path, message)] = problems({"task": TASK, "tracking": {"wandb": {"mode": "offlne"}}})
    assert path == "tracking.wandb.mode" and "did you mean offline?" in message


def test_error_message_starts_with_the_file(tmp_path):
    path = write(tmp_path, {"task": TASK, "training": {"lerning_rate": 1}})
    with pytest.raises(ConfigError, match=r"run\.yaml: training\.lerning_rate: unknown field"):
        load_run_spec(path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the file is empty"),
        ("- a\n- b\n", "expected a mapping"),
        ("task: {model_init: [\n", "not valid YAML"),
    ],
)
def test_unreadable_files(tmp_path, text, expected):
    path = tmp_path / "run.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=expected):
        load_run_spec(path)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_run_spec(tmp_path / "nope.yaml")


def test_yaml_is_data_never_code(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("task: !!python/object/apply:os.system ['touch pwned']\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_run_spec(path)
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


def test_load_spec_tells_run_files_from_study_files(tmp_path):
    assert isinstance(load_spec(write(tmp_path, {"task": TASK})), RunSpec)
