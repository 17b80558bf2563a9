"""The experiment trackers `TrainingArguments.report_to` names, as Trainer callbacks with transformers' names.

    tensorboard.py  TensorBoardCallback (torch.utils.tensorboard)
    wandb.py        WandbCallback
    mlflow.py       MLflowCallback
    logs.py         what they share (transformers' metric names, the default TensorBoard folder)

Which names exist, what "all" means and the refusals are in `trainer/report_to.py`, which the arguments import
without this package. Each callback imports its tracker's package when it is built, never when this is imported.
"""

from __future__ import annotations

from typing import Any

from trainer.integrations.mlflow import MLflowCallback
from trainer.integrations.tensorboard import TensorBoardCallback
from trainer.integrations.wandb import WandbCallback

__all__ = [
    "INTEGRATION_TO_CALLBACK",
    "MLflowCallback",
    "TensorBoardCallback",
    "WandbCallback",
    "reporting_callbacks",
]

INTEGRATION_TO_CALLBACK: dict[str, type] = {
    "mlflow": MLflowCallback,
    "tensorboard": TensorBoardCallback,
    "wandb": WandbCallback,
}


def reporting_callbacks(report_to: list[str]) -> list[Any]:
    """One new callback per integration of the (normalised) `report_to`; a missing package raises
    TrainerConfigError with the pip command, before the Trainer exists and so before the first step."""
    return [INTEGRATION_TO_CALLBACK[name]() for name in report_to]
