"""What several commands share: the study file with `--storage URL` and `--set key=value`, the trial budget, where
trials run (`--workers`, `--gpus`), and how a trial or a value is printed."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import optuna
from click.core import ParameterSource
from optuna.trial import FrozenTrial

import hpo.spec  # its names load on use: the training section imports torch, which `hpo run` defers (hpo.cli.ahead)
from hpo.errors import ConfigError, Interrupted
from hpo.scheduling.devices import DeviceId, visible_devices
from hpo.storage import remote
from hpo.storage.lineage import current_params

if TYPE_CHECKING:
    from hpo.spec import StudySpec


def set_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """--set KEY=VALUE (repeatable; the value parsed as YAML), as every command that reads a file takes it."""
    return click.option(
        "--set",
        "overrides",
        multiple=True,
        metavar="KEY=VALUE",
        help="Override a value of the file (dotted key, YAML value), e.g. --set training.max_steps=200.",
    )(command)


def storage_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--storage",
        metavar="URL",
        help="Optuna storage URL (sqlite:///..., postgresql://...) instead of the file's study.storage.",
    )(command)


def out_option(what: str, *, file: bool = False, required: bool = True, aliases: tuple[str, ...] = ()) -> Any:
    """-o/--out: where the command writes (a folder, or a file with `file=True`); `what` says what goes there."""
    kind = click.Path(dir_okay=False, path_type=Path) if file else click.Path(file_okay=False)
    return click.option(
        "-o",
        "--out",
        *aliases,
        "output_dir",
        required=required,
        type=kind,
        metavar="PATH",
        help=what,
    )


def resume_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """--resume (the newest complete checkpoint of the output folder) or --resume PATH."""
    return click.option(
        "--resume",
        is_flag=False,
        flag_value="latest",
        default=None,
        metavar="[PATH]",
        help="Resume from the newest complete checkpoint in the output folder, or from PATH.",
    )(command)


def trial_option(verb: str) -> Any:
    return click.option(
        "--trial",
        "trial_number",
        type=int,
        default=None,
        metavar="N",
        help=f"{verb} trial N instead of the best one.",
    )


def metric_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--metric",
        default=None,
        metavar="NAME",
        help="With several objectives: the one that picks the trial from the Pareto front.",
    )(command)


def dry_run_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--dry-run/--no-dry-run",
        default=True,
        show_default=True,
        # "dry run" elsewhere means "do nothing": say that this one runs, and where the check-only command is
        help="Before training, evaluate the untrained model on a few eval samples to check the objective metrics "
        "exist, then run. To check a file without running it: hpo validate FILE.",
    )(command)


def overwrite_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--overwrite",
        is_flag=True,
        help="Start afresh in an output folder that holds an earlier run's checkpoints (deletes them).",
    )(command)


def study_arguments(command: Callable[..., Any]) -> Callable[..., Any]:
    """STUDY_FILE, --storage and --set."""
    command = set_option(command)
    command = storage_option(command)
    return click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))(command)


def trial_budget_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--n-trials and --timeout, as `hpo run` and `hpo worker` take them."""
    command = click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        metavar="S",
        help="Start no new trial after S seconds.",
    )(command)
    return click.option(
        "--n-trials",
        type=click.IntRange(min=1),
        metavar="N",
        help="Total trials of the study (finished ones count; default: study.n_trials).",
    )(command)


def placement_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--workers and --gpus, as `hpo run` and `hpo worker` take them."""
    command = click.option("--gpus", metavar="IDS", help="GPUs to use, e.g. 0,1,3 (default: all visible).")(
        command
    )
    return click.option(
        "--workers", type=click.IntRange(min=1), help="Trials in parallel on CPU (one process each)."
    )(command)


def repeat_command(drop: Sequence[str] = (), add: Sequence[str] = ()) -> str:
    """The running command as the user typed it (the options given on the command line, as words a shell takes back),
    without the parameters named in `drop`, plus `add`: how an interrupted command says to continue."""
    ctx = click.get_current_context()
    words = ctx.command_path.split()
    for param in ctx.command.params:
        name = param.name or ""
        if name in drop or ctx.get_parameter_source(name) != ParameterSource.COMMANDLINE:
            continue
        value = ctx.params.get(name)
        if isinstance(param, click.Argument):
            words.append(str(value))
            continue
        option = max(param.opts, key=len)
        if isinstance(param, click.Option) and param.is_flag and param.secondary_opts:
            words.append(option if value else max(param.secondary_opts, key=len))  # --dry-run/--no-dry-run
        elif isinstance(param, click.Option) and param.is_flag:
            words += [option] if value else []
        elif isinstance(param, click.Option) and value == param.flag_value:
            words.append(option)  # an option whose value may be left out (--resume)
        else:
            words += [item for v in (value if param.multiple else [value]) for item in (option, str(v))]
    return shlex.join([*words, *add])


@contextmanager
def trial_stops_say_how_to_continue() -> Iterator[None]:
    """Ctrl-C of a command that runs trials (`hpo run`, `hpo worker`): the stop (hpo.errors.Interrupted, saying what
    each stopped trial saved) gets the command that continues; a Ctrl-C before any trial started saved nothing."""
    try:
        yield
    except (
        KeyboardInterrupt
    ):  # before any trial started: the workers and --in-process trials handle their own
        raise Interrupted(
            f"stopped: nothing was saved: no trial had started; continue with: {repeat_command()}"
        ) from None
    except Interrupted as stop:
        raise Interrupted(f"{stop}; continue with: {repeat_command()}") from None


def parse_gpus(gpus: str | None) -> list[DeviceId] | None:
    """GPU numbers, or the GPU/MIG UUIDs that CUDA_VISIBLE_DEVICES lists."""
    if gpus is None:
        return None
    chosen = visible_devices(gpus)
    if len(chosen) != len([g for g in gpus.split(",") if g.strip()]):
        raise click.BadParameter(
            f"{gpus!r}: give GPU numbers separated by commas, e.g. 0,1,3 (or the GPU-/MIG- UUIDs that "
            "CUDA_VISIBLE_DEVICES lists)",
            param_hint="--gpus",
        )
    return chosen


def load_study(study_file: Path, storage: str | None, overrides: tuple[str, ...]) -> StudySpec:
    # The commands say what happened themselves; Optuna's INFO lines ("Using an existing study...") are noise here.
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if not study_file.is_file():
        raise ConfigError(f"{study_file}: no such study file")
    spec = hpo.spec.load_study_spec(study_file, overrides=list(overrides), storage=storage)
    # An object store no machine can use is refused here, before any worker, job or trial starts.
    remote.check_store(spec.output_dir, "study.output_dir")
    return spec


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def format_params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={format_value(v)}" for k, v in params.items())


def format_values(values: list[float] | None) -> str:
    return "-" if not values else ", ".join(format_value(v) for v in values)


def trial_line(trial: FrozenTrial) -> str:
    """One finished trial, as `hpo run` and `hpo worker` print it."""
    attrs = trial.user_attrs
    if attrs.get("interrupted"):  # a stop the user asked for, not a failure: the next run resumes it
        step = attrs.get("interrupted_step")
        where = f"at step {step}" if step is not None and step >= 0 else "before training"
        return f"trial {trial.number:>3} {'STOPPED':<8} {where}  {format_params(current_params(trial))}"
    requeued = trial.state.name == "FAIL" and attrs.get("requeued")
    line = f"trial {trial.number:>3} {'REQUEUED' if requeued else trial.state.name:<8}"
    if trial.state.name == "PRUNED":
        line += f" at step {attrs.get('pruned_step')}"
    elif trial.values is not None:
        line += f" {format_values(list(trial.values))}"
    if attrs.get("duration_s") is not None:
        line += f"  {attrs['duration_s']:.1f} s"
    line += f"  {format_params(current_params(trial))}"
    if attrs.get("error"):
        line += f"\n    error: {attrs['error']}"
    return line
