"""A small, fast Trainer with Hugging Face names: `Trainer`, `TrainingArguments`, callbacks, state, control.

It knows nothing of hyperparameter search: `hpo` plugs into it through callbacks, the state and the control.
"""

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
