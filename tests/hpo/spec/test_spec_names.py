"""Names that become folders (`study.name`, a run file's `name`) cannot leave the output folder: `../x`, an absolute
path, `a/../../b`, a separator or a NUL byte is refused when the file is validated (exit 2, one line naming the field
and the fix), before anything is written, by `hpo validate`, `hpo run` and `hpo train` alike."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_spec_study import study

from hpo.cli import main
from hpo.spec import SpecError, parse_run_spec, parse_study_spec

ROOT = Path(__file__).resolve().parents[3]
HOSTILE = ["../x", "/etc/hpo-owned", "a/../../b", "a/b", "a\\b", "..", ".", "x\0y", "", "  "]
RUN = {
    "task": {
        "model_init": "studies.tasks.digits:model_init",
        "data": "studies.tasks.digits:data",
        "compute_metrics": "studies.tasks.digits:compute_metrics",
    },
    "training": {"max_steps": 1, "disable_tqdm": True},
    "tracking": {"store": False},
}


def run_main(*args: str) -> int:
    with pytest.raises(SystemExit) as stop:
        main(list(args))
    return stop.value.code


@pytest.mark.parametrize("name", HOSTILE)
def test_a_study_name_that_is_not_one_folder_name_is_refused(name):
    with pytest.raises(SpecError) as caught:
        parse_study_spec(study(**{"study.name": name}), source="study.yaml")
    ((path, message),) = caught.value.problems
    assert path == "study.name"
    assert "one plain name" in message and "study.output_dir" in message
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("name", HOSTILE)
def test_a_run_name_that_is_not_one_folder_name_is_refused(name):
    with pytest.raises(SpecError) as caught:
        parse_run_spec({**RUN, "name": name}, source="run.yaml")
    ((path, message),) = caught.value.problems
    assert path == "name" and "one plain name" in message and "set output_dir" in message


@pytest.mark.parametrize("name", ["digits-mlp_2", "v1.2", "study with spaces", "étude"])
def test_plain_names_are_accepted(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = parse_study_spec(study(**{"study.name": name}), source="study.yaml")
    assert Path(spec.output_dir) == tmp_path / "runs" / name
    assert parse_run_spec({**RUN, "name": name}).output_dir == str(tmp_path / "runs" / name)


def test_a_file_named_dot_dot_yaml_needs_a_name(tmp_path):
    """The file's stem is the default name; `..yaml` has the stem `.`, which is the runs folder itself."""
    with pytest.raises(
        SpecError, match=r"study\.name: not set, and the file's name gives '\.'.*set study\.name"
    ):
        parse_study_spec(study(**{"study.name": None}), source="..yaml", default_name=".")


def test_output_dir_is_still_a_path_on_purpose(tmp_path):
    spec = parse_study_spec(study(**{"study.output_dir": str(tmp_path / "a" / ".." / "b")}))
    assert Path(spec.output_dir) == tmp_path / "a" / ".." / "b"


@pytest.mark.parametrize("command", ["validate", "run"])
def test_hpo_refuses_an_escaping_study_name_before_writing_anything(command, tmp_path, monkeypatch, capsys):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    file = work / "study.yaml"
    file.write_text(yaml.safe_dump(study(**{"study.name": "../escaped", "study.n_trials": 1})))
    assert run_main(command, str(file)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {file}: study.name: '../escaped' holds a path separator"), err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]  # no tmp_path/escaped
    assert not (work / "runs").exists()


def test_hpo_run_refuses_an_absolute_name_given_with_set(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    file = tmp_path / "study.yaml"
    file.write_text(yaml.safe_dump(study(**{"study.n_trials": 1})))
    target = tmp_path / "elsewhere"
    assert run_main("run", str(file), "--set", f"study.name={target}") == 2
    err = capsys.readouterr().err.strip()
    assert f"study.name: '{target}' holds a path separator" in err and len(err.splitlines()) == 1
    assert not target.exists() and not (tmp_path / "runs").exists()


def test_hpo_train_refuses_an_escaping_run_name(tmp_path, monkeypatch, capsys):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    file = work / "run.yaml"
    file.write_text(yaml.safe_dump({**RUN, "name": "a/../../b"}))
    assert run_main("train", str(file)) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith(f"error: {file}: name: 'a/../../b' holds a path separator")
        and len(err.splitlines()) == 1
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"] and not (work / "runs").exists()
