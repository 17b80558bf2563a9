"""`python -m hpo.cli ...` (used by launchers: torchrun, accelerate launch, deepspeed) is the `hpo` command."""

from hpo.cli.app import entry

entry()
