"""`report_to="tensorboard"`: transformers' `TensorBoardCallback`, writing with torch.utils.tensorboard.

The run folder is TENSORBOARD_LOGGING_DIR, else `<output_dir>/runs/<date>_<host>` (transformers 5 and torch's
default), else, in a hyperparameter search, `<output_dir>/runs/<date>_<host>/<trial name>`. At the start of training:
the arguments (and a transformers model's config) as text, and the hyperparameters once, in the same run folder (not
a sub-folder as `SummaryWriter.add_hparams` makes), so that TensorBoard's HParams view lists the run beside its curves.
Every log record becomes scalars named as transformers names them (`train/loss`, `eval/accuracy`) at the global step.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from trainer.callbacks import TrainerCallback
from trainer.errors import TrainerConfigError
from trainer.integrations.logs import default_logdir, rewrite_logs
from trainer.report_to import missing_package_message

logger = logging.getLogger(__name__)


def summary_writer_class() -> Any:
    """torch's SummaryWriter; importing it imports tensorboard (a quarter of a second), so only callbacks that write
    pay for it. A missing package is refused with the pip command."""
    message = missing_package_message("tensorboard")
    if message is not None:
        raise TrainerConfigError(message)
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter


def sanitized_arguments(args: Any) -> dict[str, Any]:
    """transformers' `to_sanitized_dict`: the arguments, `train_batch_size` and `eval_batch_size` added."""
    return {
        **args.to_dict(),
        "train_batch_size": args.train_batch_size,
        "eval_batch_size": args.eval_batch_size,
    }


class TensorBoardCallback(TrainerCallback):
    """Sends the logs to TensorBoard. `tb_writer`: a SummaryWriter to use instead of making one."""

    def __init__(self, tb_writer: Any = None) -> None:
        self._SummaryWriter = summary_writer_class()
        self.tb_writer = tb_writer
        folder = os.environ.get("TENSORBOARD_LOGGING_DIR")
        self.logging_dir = os.path.expanduser(folder) if folder else None
        self._hparams_written: set[str] = set()

    def _init_summary_writer(self, args: Any) -> None:
        if self.logging_dir is None:
            self.logging_dir = os.path.join(args.output_dir, default_logdir())
        self.tb_writer = self._SummaryWriter(log_dir=self.logging_dir)

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        if state.is_hyper_param_search and state.trial_name is not None:
            self.logging_dir = os.path.join(args.output_dir, default_logdir(), state.trial_name)
        if self.tb_writer is None:
            self._init_summary_writer(args)
        self.tb_writer.add_text("args", args.to_json_string())
        config = getattr(kwargs.get("model"), "config", None)
        if config is not None and hasattr(config, "to_json_string"):
            self.tb_writer.add_text("model_config", config.to_json_string())
        folder = str(self.tb_writer.log_dir)
        if folder not in self._hparams_written:  # once per run folder, even when train() is called again
            # here, not at the top: the module imports tensorboard's protobufs, and tensorboard is optional
            from trainer.integrations.hparams import write_hparams

            write_hparams(self.tb_writer, {**sanitized_arguments(args), **(state.trial_params or {})})
            self._hparams_written.add(folder)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero:
            return
        if self.tb_writer is None:
            self._init_summary_writer(args)
        for key, value in rewrite_logs(logs or {}).items():
            if isinstance(value, int | float):
                self.tb_writer.add_scalar(key, value, state.global_step)
            elif isinstance(value, str):
                self.tb_writer.add_text(key, value, state.global_step)
            else:
                logger.warning(
                    "TensorBoard: %r (%s) of %r is not a scalar; it is left out", value, type(value), key
                )
        self.tb_writer.flush()

    def on_train_end(self, args, state, control, **kwargs):
        if self.tb_writer is not None:
            self.tb_writer.close()
            self.tb_writer = None
