"""The `hpo` command line: the click group, the command table, and `main` (one clear line per user error).

Each command lives in its own module (`hpo/cli/<command>.py`) and is imported only when it runs; the table below
holds each command's one-line summary too, so `hpo --help` lists them without importing any (torch, optuna)."""

from __future__ import annotations

import gc
import importlib
import re
import signal
import sys
import traceback
from typing import NamedTuple

import click

from hpo.errors import HpoError, Interrupted
from hpo.scheduling import early_interrupt


class CommandEntry(NamedTuple):
    target: str  # "module:attribute" of the click.Command
    summary: str  # the one line `hpo --help` shows; the command's own short_help


# Add a line here for each new command.
COMMANDS: dict[str, CommandEntry] = {
    "train": CommandEntry("hpo.cli.train:train", "Train one model from a run file."),
    "validate": CommandEntry("hpo.cli.validate:validate", "Check a run or study file without training."),
    "run": CommandEntry("hpo.cli.run:run", "Run a study, or continue it."),
    "status": CommandEntry("hpo.cli.status:status", "Show the trials of a study."),
    "best": CommandEntry("hpo.cli.best:best", "Show the best trial (or the Pareto front)."),
    "dashboard": CommandEntry("hpo.cli.dashboard:dashboard", "Serve the live web dashboard."),
    "report": CommandEntry("hpo.cli.report:report", "Write a self-contained HTML report."),
    "export": CommandEntry("hpo.cli.export:export", "Export the best model and check it reloads."),
    "retrain": CommandEntry("hpo.cli.retrain:retrain", "Train the best parameters again, from scratch."),
    "worker": CommandEntry("hpo.cli.worker:worker", "Run a study's trials on this machine too."),
    "cancel": CommandEntry("hpo.cli.cancel:cancel", "Cancel a study's SLURM jobs."),
}


def summary(name: str) -> str:
    return COMMANDS[name].summary


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        entry = COMMANDS.get(name)
        if entry is None:
            return None
        module_name, attribute = entry.target.split(":")
        return getattr(importlib.import_module(module_name), attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from the table, without importing the commands."""
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name].summary) for name in self.list_commands(ctx)])


@click.group(cls=LazyGroup)
@click.option("--debug", is_flag=True, help="Show full tracebacks for errors.")
@click.version_option(package_name="hpo")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Hyperparameter search and training for PyTorch.

    \b
    hpo train studies/digits_mlp_run.yaml    train one model
    hpo run studies/digits_mlp.yaml          run a study (again: continues it)
    hpo status studies/digits_mlp.yaml       its trials (then: best, report, export)

    A bad file exits with code 2 and names the field to fix; `hpo --debug COMMAND ...` shows the traceback."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def entry() -> None:
    """The `hpo` command (console script and `python -m hpo.cli`): `main`, then a quick way out of the process."""
    early_interrupt.install()
    try:
        main()
    finally:
        # The command has said its last word: a Ctrl-C now (a second press, late) would only print a traceback from
        # some library's exit handler (torch's, in the middle of an import).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # On the way out the interpreter collects garbage over every object torch and the study left (0.3-0.6 s of
        # each run's wall time); frozen, they are skipped. Not in `main`: tests call it many times in one process.
        gc.freeze()


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors print one clear message and exit with their code (2 for config and usage)."""
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        cli.main(args=argv, prog_name="hpo", standalone_mode=False)
    except click.exceptions.Exit as stop:
        sys.exit(stop.exit_code)
    except click.UsageError as error:  # one line: the command, the problem, where to read more
        command = error.ctx.command_path if error.ctx is not None else "hpo"
        # click quotes option and argument names ('--gpus', 'STUDY_FILE'); the user's own values keep their quotes.
        message = re.sub(r"'(--?[\w-]+|[A-Z_]+)'", r"\1", error.format_message()).rstrip(".")
        message = message[0].lower() + message[1:] if message else message
        click.echo(f"error: {command}: {message} (see {command} --help)", err=True)
        sys.exit(error.exit_code)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except click.exceptions.Abort:  # Ctrl-C of a command that writes nothing or only at its end, atomically
        click.echo("stopped: nothing was saved; run the command again to finish it", err=True)
        sys.exit(130)
    except Interrupted as error:  # a stop the user asked for: not an error; the message says what was saved
        click.echo(str(error), err=True)
        sys.exit(error.exit_code)
    except HpoError as error:
        if debug:
            traceback.print_exc()
        click.echo(f"error: {error}", err=True)
        sys.exit(error.exit_code)
    except Exception as error:
        if debug or not storage_unreachable(error):
            raise
        # A database that stopped answering (a PostgreSQL restart, a lost network): not a bug to show as a traceback.
        reason = str(error).strip().splitlines()[0][:300] if str(error).strip() else type(error).__name__
        click.echo(
            f"error: the study's storage did not answer ({reason}); finished trials are kept in it: run the "
            "command again once it answers",
            err=True,
        )
        sys.exit(1)
    sys.exit(0)


def storage_unreachable(error: BaseException) -> bool:
    """Whether `error` is the storage's database failing to answer, as Optuna and SQLAlchemy raise it. Their modules
    are looked up, not imported: the error cannot be theirs unless they were loaded (and `hpo --help` stays light)."""
    kinds = []
    if (optuna_errors := sys.modules.get("optuna.exceptions")) is not None:
        kinds.append(optuna_errors.StorageInternalError)
    if (database_errors := sys.modules.get("sqlalchemy.exc")) is not None:
        kinds += [database_errors.OperationalError, database_errors.InterfaceError]
    return bool(kinds) and isinstance(error, tuple(kinds))
