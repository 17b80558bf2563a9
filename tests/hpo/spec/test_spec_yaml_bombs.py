"""Hostile YAML: an alias bomb ("billion laughs"), an alias cycle and absurd nesting are refused while the file is read,
in well under a second and a few MB, with one line naming the file (exit 2): never a hang or a MemoryError in a later
copy (--set's deepcopy, pydantic, json.dumps) that writes the shared aliases out."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest
import yaml
from test_spec_study import STUDY

from hpo.cli import main
from hpo.errors import ConfigError
from hpo.spec import apply_overrides, load_study_spec
from hpo.spec.overrides import MAX_EXPANDED_NODES, parse_yaml


def alias_bomb(levels: int = 9, fan_out: int = 10) -> str:
    """`a: &a [lol x10]`, then each level a list of ten aliases of the one before: 10**levels strings."""
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels + 1):
        previous, current = f"l{level - 1}" if level > 1 else "a", f"l{level}"
        lines.append(f"{current}: &{current} [{', '.join([f'*{previous}'] * fan_out)}]")
    return "\n".join(lines) + "\n"


def run_main(*args: str) -> int:
    with pytest.raises(SystemExit) as stop:
        main(list(args))
    return stop.value.code


def study_with(tmp_path: Path, extra: str, name: str = "study.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(STUDY) + extra)
    return path


def test_an_alias_bomb_in_a_study_file_is_refused_quickly_in_bounded_memory(tmp_path):
    path = study_with(tmp_path, "model:\n  " + alias_bomb().replace("\n", "\n  "))
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ConfigError) as caught:
            load_study_spec(path)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(caught.value)
    assert message.startswith(f"{path}: refused: line ") and "alias bomb" in message, message
    assert "\n" not in message
    assert elapsed < 0.5, elapsed
    assert peak < 20 * 2**20, peak


@pytest.mark.parametrize("command", ["validate", "run", "train"])
def test_every_command_refuses_the_bomb_with_one_line_and_exit_2(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb())
    started = time.perf_counter()
    assert run_main(command, str(path)) == 2
    assert time.perf_counter() - started < 5  # the command's own start-up, not the bomb
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {path}: refused: ") and len(err.splitlines()) == 1, err
    assert not (tmp_path / "runs").exists()


def test_a_bomb_given_with_set_is_refused_naming_the_option():
    with pytest.raises(ConfigError, match=r"^--set model\.x: refused: .*alias bomb"):
        apply_overrides({}, ["model.x=" + "{" + alias_bomb().replace("\n", ", ").rstrip(", ") + "}"])


def test_an_alias_cycle_is_refused():
    with pytest.raises(
        ConfigError, match=r"^c\.yaml: refused: line 1: an alias refers to a node that contains it"
    ):
        parse_yaml("a: &a [1, *a]", source="c.yaml")


def test_absurd_nesting_is_refused_not_a_recursion_traceback():
    with pytest.raises(ConfigError, match=r"^deep\.yaml: refused: nested too deeply"):
        parse_yaml("[" * 20_000 + "]" * 20_000, source="deep.yaml")


def test_ordinary_anchors_and_merge_keys_still_load():
    data = parse_yaml(
        "defaults: &d {lr: 3e-4, layers: [1, 2, 3]}\nsmall: {<<: *d, layers: [1]}\nsame: *d\n",
        source="ok.yaml",
    )
    assert data["small"] == {"lr": 3e-4, "layers": [1]} and data["same"]["layers"] == [1, 2, 3]
    # Just under the limit loads: 9 aliases of 9 aliases of ... stays below MAX_EXPANDED_NODES.
    assert 9**5 < MAX_EXPANDED_NODES
    assert len(parse_yaml(alias_bomb(levels=4, fan_out=9), source="ok.yaml")["l4"]) == 9
