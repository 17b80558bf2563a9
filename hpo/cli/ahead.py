"""`hpo run` starts its worker processes first, before it imports torch (1.5 s) and checks the whole study file, so
that the workers' own start-up (torch, the trial code: seconds) runs alongside.

The slots come from the file's `resources:` section (with the --set overrides) and the command's --workers / --gpus,
read without the rest of the file. Should the full check later give other slots (or fail), the pool starts fresh
workers for the slots that differ and ends these (hpo.scheduling.spawn.StartedAhead).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

from hpo.errors import ConfigError
from hpo.scheduling.devices import DeviceId
from hpo.scheduling.spawn import StartedAhead, start_workers_ahead
from hpo.spec.names import check_plain_name
from hpo.spec.output_url import is_url, mirror_dir
from hpo.spec.overrides import apply_overrides, load_yaml_file
from hpo.spec.sections import ResourcesSpec


def start_ahead(
    study_file: Path, overrides: Sequence[str], workers: int | None, gpus: Sequence[DeviceId] | None
) -> StartedAhead | None:
    """The workers for the slots the file asks for, started now; None when the file cannot be read this way (the
    full check then says why)."""
    try:
        data = apply_overrides(load_yaml_file(study_file), list(overrides))
        study = data.get("study") or {}
        resources = ResourcesSpec.model_validate(data.get("resources") or {})
        name = study.get("name") or study_file.stem  # as hpo.spec.loading names and places the study
        # A name that leaves runs/ (../x) must not get worker logs written outside before the full check refuses it.
        check_plain_name(str(name), output_field="study.output_dir")
        given = study.get("output_dir")
        if is_url(given):  # an object store: the workers' logs go to this machine's mirror of it
            output_dir = mirror_dir(given)
        else:
            output_dir = Path(given or Path("runs") / name).expanduser().absolute()
        return start_workers_ahead(resources, output_dir, workers=workers, gpus=gpus)
    except (ConfigError, ValueError, yaml.YAMLError, OSError, TypeError, AttributeError):
        return None


def file_launcher(study_file: Path, overrides: Sequence[str]) -> str:
    """The file's `launcher.type` (with the --set overrides), read as cheaply as the slots are: `hpo run` must know
    whether to start local workers before it checks the whole file. Unreadable: local (the full check says why)."""
    try:
        launcher = apply_overrides(load_yaml_file(study_file), list(overrides)).get("launcher") or {}
        return str(launcher.get("type") or "local")
    except (ConfigError, ValueError, yaml.YAMLError, OSError, TypeError, AttributeError):
        return "local"
