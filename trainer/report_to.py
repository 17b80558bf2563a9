"""`TrainingArguments.report_to`: which experiment trackers the Trainer reports to, with transformers' names.

"none" (or None, or ["none"]) is no tracker; "all" is every integration whose package is installed, resolved when the
arguments are built (as transformers does); anything else is a name or a list of names. A name that is not an
integration here is refused at once with the list. A named integration whose package is missing is accepted here and
refused when the Trainer is built (before the first step) with the pip command, as transformers refuses it in the
callback's constructor: the arguments may be built on a machine that only writes a config.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

from trainer.errors import TrainerConfigError

# name -> (the module the integration imports, the pip command that installs it)
INTEGRATIONS: dict[str, tuple[str, str]] = {
    "mlflow": ("mlflow", "pip install 'hpo[mlflow]' (or pip install mlflow-skinny)"),
    "tensorboard": ("tensorboard", "pip install 'hpo[tensorboard]' (or pip install tensorboard)"),
    "wandb": ("wandb", "pip install wandb"),
}

# transformers' other integrations: their names are refused with the reason, not as typos
TRANSFORMERS_ONLY = (
    "azure_ml",
    "clearml",
    "codecarbon",
    "comet_ml",
    "dagshub",
    "dvclive",
    "flyte",
    "kubeflow",
    "neptune",
    "swanlab",
    "trackio",
)


def installed(module: str) -> bool:
    """Whether `import module` can work, without importing it (mlflow's and wandb's imports cost about a second)."""
    if module in sys.modules:
        return sys.modules[module] is not None  # None: an import known to fail
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def available_integrations() -> list[str]:
    """The integrations whose package is installed: what "all" means, as transformers'
    `get_available_reporting_integrations`. DISABLE_MLFLOW_INTEGRATION=TRUE leaves mlflow out, as there."""
    mlflow_off = os.environ.get("DISABLE_MLFLOW_INTEGRATION", "FALSE").upper() == "TRUE"
    return [
        name
        for name, (module, _) in INTEGRATIONS.items()
        if installed(module) and not (name == "mlflow" and mlflow_off)
    ]


def normalise_report_to(value: Any) -> list[str]:
    """The list of integration names `report_to` stands for; an unknown name raises TrainerConfigError."""
    if value is None or value == "none" or value == ["none"]:
        return []
    if value == "all" or value == ["all"]:
        return available_integrations()
    names = [value] if isinstance(value, str) else list(value)
    for name in names:
        if name not in INTEGRATIONS:
            raise TrainerConfigError(unknown_message(name))
    return list(dict.fromkeys(names))  # each integration once, in the order given


def unknown_message(name: Any) -> str:
    choices = ", ".join(repr(n) for n in INTEGRATIONS)
    why = (
        "is a transformers integration that this Trainer does not have"
        if name in TRANSFORMERS_ONLY
        else "is not an integration"
    )
    return (
        f"training argument 'report_to' names {name!r}, which {why}; choose from {choices}, 'all' or 'none'"
    )


def missing_package(name: str) -> str | None:
    """ "the <package> package is not installed: <pip command>" for an integration whose package is missing, else None."""
    module, command = INTEGRATIONS[name]
    return None if installed(module) else f"the {module} package is not installed: {command}"


def missing_package_message(name: str) -> str | None:
    """The one-line refusal for a named integration whose package is not installed, or None when it is."""
    missing = missing_package(name)
    return None if missing is None else f"report_to names {name!r} but {missing}; or remove it from report_to"
