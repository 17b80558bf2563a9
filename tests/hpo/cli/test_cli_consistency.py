"""The command line as a whole, over the command table of hpo/cli/app.py: every `--help` starts with the command's
one-line summary and shows an example; the same thing has the same option name (and metavar, and help) in every
command; a usage error is one line naming the option and the fix, exit 2; a missing file is one line naming it, exit 2.
"""

from __future__ import annotations

from collections import defaultdict

import click
import pytest

from hpo.cli import COMMANDS, main
from hpo.cli.app import cli

# Options whose help names what the command does with them ("Export this trial", "HTML file to write").
OWN_WORDS = {"trial_number", "output_dir"}
# Required options a command refuses to start without (a missing file is then the first problem found).
REQUIRED = {"export": ["--out", "x"], "report": ["--out", "x.html"], "retrain": ["--out", "x"]}


def _cli(args: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def _command(name: str) -> click.Command:
    with click.Context(cli) as ctx:
        command = cli.get_command(ctx, name)
    assert command is not None
    return command


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_starts_with_the_summary_and_shows_an_example(name, capsys):
    code, out, _ = _cli([name, "--help"], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"Usage: hpo {name} ") and lines[1] == ""
    assert lines[2].strip() == COMMANDS[name].summary, out
    example = lines.index("  Example:") if "  Example:" in lines else None
    assert example is not None, out
    assert lines[example + 1].strip().startswith(f"hpo {name} "), out


def test_the_same_thing_has_the_same_option_name_metavar_and_help_everywhere():
    names, by_option = defaultdict(set), defaultdict(set)
    helps = defaultdict(set)
    for command_name in COMMANDS:
        for param in _command(command_name).params:
            if not isinstance(param, click.Option):
                continue
            primary = next(opt for opt in param.opts if opt.startswith("--"))
            names[param.name].add((primary, param.metavar))
            for opt in param.opts:
                by_option[opt].add(param.name)
            if param.name not in OWN_WORDS:
                helps[param.name].add(param.help)
    assert {k: v for k, v in names.items() if len(v) > 1} == {}
    assert {k: v for k, v in by_option.items() if len(v) > 1} == {}
    assert {k: v for k, v in helps.items() if len(v) > 1} == {}


@pytest.mark.parametrize("name", sorted(set(COMMANDS) - {"dashboard"}))
def test_a_missing_file_is_one_line_naming_it_exit_2(name, tmp_path, capsys):
    missing = tmp_path / "missing.yaml"
    code, _, err = _cli([name, str(missing), *REQUIRED.get(name, [])], capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and str(missing) in err and "no such" in err, err


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_an_unknown_option_is_one_line_naming_it_and_the_help_exit_2(name, capsys):
    code, out, err = _cli([name, "--no-such-option"], capsys)
    assert code == 2
    assert err.strip() == f"error: hpo {name}: no such option --no-such-option (see hpo {name} --help)", err
