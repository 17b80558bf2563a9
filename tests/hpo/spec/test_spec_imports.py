"""Resolving `module:function` paths of the task section, and the error for each way it can fail."""

from __future__ import annotations

import sys

import pytest
import yaml

from hpo.errors import ConfigError
from hpo.spec import load_run_spec
from hpo.spec.imports import resolve_callable

TASK = {"model_init": "studies.tasks.digits:model_init", "data": "studies.tasks.digits:data"}


@pytest.fixture
def clean_sys_path(monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    modules = set(sys.modules)
    yield
    for name in set(sys.modules) - modules:
        if name.startswith(("my_tasks", "pkg_tasks", "broken_tasks", "needs_missing")):
            del sys.modules[name]


def resolve_error(task: dict, tmp_path) -> str:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"task": task}))
    with pytest.raises(ConfigError) as caught:
        load_run_spec(path).task.resolve()
    return str(caught.value)


def test_task_resolves_to_callables():
    from hpo.spec import parse_run_spec

    task = parse_run_spec(
        {"task": {**TASK, "compute_metrics": "studies.tasks.digits:compute_metrics"}}
    ).task.resolve()
    model = task.model_init({"hidden_size": 16})
    assert model.net[0].out_features == 16
    train, evaluation = task.data({})
    assert len(train) + len(evaluation) == 1797
    assert task.collator is None and task.tokenizer is None


def test_missing_module_is_named(tmp_path):
    message = resolve_error({**TASK, "model_init": "studies.tasks.nope:model_init"}, tmp_path)
    assert "task.model_init: module 'studies.tasks.nope' not found" in message


def test_missing_function_suggests_a_close_name(tmp_path):
    message = resolve_error({**TASK, "data": "studies.tasks.digits:dta"}, tmp_path)
    assert "task.data: module 'studies.tasks.digits' has no attribute 'dta' (did you mean data?)" in message


def test_attribute_that_is_not_callable(tmp_path):
    message = resolve_error({**TASK, "data": "studies.tasks.digits:EVAL_FRACTION"}, tmp_path)
    assert "task.data:" in message and "not a function" in message


def test_module_next_to_the_yaml_file_is_importable(tmp_path, clean_sys_path):
    (tmp_path / "my_tasks.py").write_text(
        "def build(params):\n    return ('model', params)\n\ndef load():\n    return 1, 2\n"
    )
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"task": {"model_init": "my_tasks:build", "data": "my_tasks:load"}}))
    task = load_run_spec(path).task.resolve()
    assert task.model_init({"a": 1}) == ("model", {"a": 1})
    assert task.data({"ignored": True}) == (1, 2)  # a data() without parameters is called without them


def test_package_root_above_the_yaml_file_is_importable(tmp_path, clean_sys_path):
    package = tmp_path / "pkg_tasks"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tasks.py").write_text(
        "def model_init(params):\n    return params\n\ndef data(params):\n    return 1, 2\n"
    )
    path = package / "run.yaml"
    path.write_text(
        yaml.safe_dump({"task": {"model_init": "pkg_tasks.tasks:model_init", "data": "pkg_tasks.tasks:data"}})
    )
    assert load_run_spec(path).task.resolve().model_init({"x": 1}) == {"x": 1}


def test_module_that_fails_to_import_says_why(tmp_path, clean_sys_path):
    (tmp_path / "broken_tasks.py").write_text("raise RuntimeError('boom at import')\n")
    (tmp_path / "needs_missing.py").write_text("import not_installed_anywhere\n")
    sys.path.append(str(tmp_path))
    with pytest.raises(ConfigError, match="importing 'broken_tasks' failed: RuntimeError: boom at import"):
        resolve_callable("broken_tasks:f", field="task.data")
    with pytest.raises(ConfigError, match="needs module 'not_installed_anywhere', which is not installed"):
        resolve_callable("needs_missing:f", field="task.data")


def test_function_needing_more_arguments_is_refused(tmp_path, clean_sys_path):
    (tmp_path / "my_tasks.py").write_text("def build(a, b):\n    return a\n\ndef load(p):\n    return 1, 2\n")
    message = resolve_error({"model_init": "my_tasks:build", "data": "my_tasks:load"}, tmp_path)
    assert "task.model_init:" in message and "needs 2 arguments" in message
