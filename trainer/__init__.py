"""A small, fast Trainer with Hugging Face names: `Trainer`, `TrainingArguments`, callbacks, state, control.

It knows nothing of hyperparameter search: `hpo` plugs into it through callbacks, the state and the control.
"""

import importlib
from typing import TYPE_CHECKING, Any

# Public names, loaded on first use: name -> the module that defines it. So `trainer.args` (what a study file's
# `training:` section is checked against) imports without torch, and `hpo status` does not pay torch's import (3 s).
_EXPORTS = {
    "CallbackHandler": "trainer.callbacks",
    "CheckpointError": "trainer.errors",
    "DefaultFlowCallback": "trainer.callbacks",
    "EarlyStoppingCallback": "trainer.callbacks",
    "EvalPrediction": "trainer.outputs",
    "Event": "trainer.events",
    "ExportableState": "trainer.callbacks",
    "IntervalStrategy": "trainer.args",
    "MLflowCallback": "trainer.integrations",
    "NonFiniteLossError": "trainer.errors",
    "PredictionOutput": "trainer.outputs",
    "PrinterCallback": "trainer.callbacks",
    "ProgressCallback": "trainer.callbacks",
    "SaveStrategy": "trainer.args",
    "TensorBoardCallback": "trainer.integrations",
    "TrainOutput": "trainer.outputs",
    "Trainer": "trainer.trainer",
    "TrainerCallback": "trainer.callbacks",
    "TrainerConfigError": "trainer.errors",
    "TrainerControl": "trainer.state",
    "TrainerError": "trainer.errors",
    "TrainerState": "trainer.state",
    "TrainingArguments": "trainer.args",
    "WandbCallback": "trainer.integrations",
    "enable_full_determinism": "trainer.seed",
    "prepare_for_fork": "trainer.fork_warmup",
    "set_seed": "trainer.seed",
}

if TYPE_CHECKING:  # what the names are, for type checkers and editors
    from trainer.args import IntervalStrategy, SaveStrategy, TrainingArguments
    from trainer.callbacks import (
        CallbackHandler,
        DefaultFlowCallback,
        EarlyStoppingCallback,
        ExportableState,
        PrinterCallback,
        ProgressCallback,
        TrainerCallback,
    )
    from trainer.errors import CheckpointError, NonFiniteLossError, TrainerConfigError, TrainerError
    from trainer.events import Event
    from trainer.fork_warmup import prepare_for_fork
    from trainer.integrations import MLflowCallback, TensorBoardCallback, WandbCallback
    from trainer.outputs import EvalPrediction, PredictionOutput, TrainOutput
    from trainer.seed import enable_full_determinism, set_seed
    from trainer.state import TrainerControl, TrainerState
    from trainer.trainer import Trainer


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'trainer' has no attribute {name!r}")


__all__ = [
    "CallbackHandler",
    "CheckpointError",
    "DefaultFlowCallback",
    "EarlyStoppingCallback",
    "EvalPrediction",
    "Event",
    "ExportableState",
    "IntervalStrategy",
    "MLflowCallback",
    "NonFiniteLossError",
    "PredictionOutput",
    "PrinterCallback",
    "ProgressCallback",
    "SaveStrategy",
    "TensorBoardCallback",
    "TrainOutput",
    "Trainer",
    "TrainerCallback",
    "TrainerConfigError",
    "TrainerControl",
    "TrainerError",
    "TrainerState",
    "TrainingArguments",
    "WandbCallback",
    "enable_full_determinism",
    "prepare_for_fork",
    "set_seed",
]
