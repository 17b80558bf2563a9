"""The study's `launcher:` section: where `hpo run` starts the study's workers (this machine, or a SLURM job array).

    launcher:
      type: slurm              # or --launcher slurm; default local (worker processes on this machine)
      partition: gpu
      time: "02:00:00"         # each task's time limit (SLURM's forms: minutes, h:mm:ss, d-hh:mm, ...)
      account: my-project
      qos: normal
      gpus: true               # each task asks for resources.gpus_per_trial GPUs (default: CPU tasks)
      cpus_per_task: 8         # default: resources.threads_per_trial x ranks per trial (1 when unset)
      mem: 32G
      signal_grace: 60         # seconds before the time limit at which a task is told to save and stop
      sbatch_options: ["--constraint=a100"]

`hpo.integrations.slurm` turns it, with `resources:`, into the job script; the schema here fixes names and forms.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from hpo.spec.base import Section

# SLURM's time forms: minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes,
# days-hours:minutes:seconds (sbatch --time).
_TIME = re.compile(r"^(\d+-\d+(:\d+){0,2}|\d+(:\d+){0,2})$")
_NAME = re.compile(r"^[A-Za-z0-9_.,-]+$")  # a partition may be a comma-separated list
_MEMORY = re.compile(r"^\d+[KMGT]?$")
# Options the launcher writes itself: given again they would send the logs elsewhere, split the array, or stop the
# save before the time limit; the message names the field that sets each.
_OWN_OPTIONS = {
    "--array": "the task count is hpo run's --workers",
    "--output": "each task's log goes to <output_dir>/.hpo/slurm/",
    "--error": "each task's log goes to <output_dir>/.hpo/slurm/",
    "--job-name": "the job is named after study.name",
    "--signal": "use launcher.signal_grace",
    "--time": "use launcher.time",
    "--partition": "use launcher.partition",
    "--account": "use launcher.account",
    "--qos": "use launcher.qos",
    "--cpus-per-task": "use launcher.cpus_per_task",
    "--mem": "use launcher.mem",
    "--gpus-per-task": "use launcher.gpus (with resources.gpus_per_trial)",
    "--wrap": "the job script runs hpo worker",
}


class LauncherSpec(Section):
    type: Literal["local", "slurm"] = "local"
    partition: str | None = None
    time: str | None = None
    account: str | None = None
    qos: str | None = None
    gpus: bool = False
    cpus_per_task: int | None = Field(None, ge=1)
    mem: str | None = None
    signal_grace: int = Field(60, ge=1)
    sbatch_options: list[str] = []

    @field_validator("time", mode="before")
    @classmethod
    def _time(cls, value: object) -> object:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # minutes, as sbatch takes a bare number
        if value is None or (isinstance(value, str) and _TIME.match(value)):
            return value
        raise ValueError(
            f"{value!r} is not a SLURM time; write minutes (90), h:mm:ss (02:00:00) or d-hh:mm (1-12:00)"
        )

    @field_validator("partition", "account", "qos")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is None or _NAME.match(value):
            return value
        raise ValueError(f"{value!r} is not a SLURM name (letters, digits, _ . - and commas)")

    @field_validator("mem")
    @classmethod
    def _memory(cls, value: str | None) -> str | None:
        if value is None or _MEMORY.match(value):
            return value
        raise ValueError(f"{value!r} is not a SLURM memory size; write e.g. 32G or 16000M")

    @field_validator("sbatch_options")
    @classmethod
    def _options(cls, options: list[str]) -> list[str]:
        for option in options:
            if not option.startswith("-") or "\n" in option:
                raise ValueError(f"{option!r}: give each sbatch option as one word, e.g. --constraint=a100")
            name = option.split("=", 1)[0]
            if name in _OWN_OPTIONS:
                raise ValueError(f"{option!r}: hpo sets {name} itself; {_OWN_OPTIONS[name]}")
        return options
