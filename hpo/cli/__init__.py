"""The `hpo` command line: `app.py` holds the click group and `main`; one module per command; `options.py` holds the
arguments several commands share (the study file, --storage, --set, the trial budget, --gpus, the trial lines)."""

from hpo.cli.app import COMMANDS, cli, main

__all__ = ["COMMANDS", "cli", "main"]
