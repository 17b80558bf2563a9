"""The `hpo` command line. Each command lives in its own module under `hpo/commands/` and is imported lazily, so
`hpo --help` stays fast and a command's heavy imports (torch, optuna) load only when that command runs."""

from __future__ import annotations

import importlib
import sys
import traceback

import click

from hpo.errors import HpoError

# name -> "module:attribute" of a click.Command. Add a line here for each new command.
COMMANDS: dict[str, str] = {
    "train": "hpo.commands.train:train",
    "validate": "hpo.commands.validate:validate",
    "run": "hpo.commands.run:run",
    "status": "hpo.commands.status:status",
    "best": "hpo.commands.best:best",
    "dashboard": "hpo.commands.dashboard:dashboard",
    "report": "hpo.commands.report:report",
    "export": "hpo.commands.export:export",
    "retrain": "hpo.commands.retrain:retrain",
    "worker": "hpo.commands.worker:worker",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        return getattr(importlib.import_module(module_name), attribute)


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


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors print one clear message and exit with their code (2 for config and usage)."""
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        cli.main(args=argv, prog_name="hpo", standalone_mode=False)
    except click.exceptions.Exit as stop:
        sys.exit(stop.exit_code)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except HpoError as error:
        if debug:
            traceback.print_exc()
        click.echo(f"error: {error}", err=True)
        sys.exit(error.exit_code)
    sys.exit(0)


if __name__ == "__main__":
    main()
