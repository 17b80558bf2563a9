"""`report_to="wandb"`: transformers' `WandbCallback`, one wandb run per training.

Environment, as transformers reads it: WANDB_PROJECT (default "huggingface"), WANDB_LOG_MODEL ("end": the trained
model as an artifact at the end; "checkpoint": every checkpoint; "false"), WANDB_WATCH ("gradients", "parameters",
"all" or "false"), and wandb's own variables (WANDB_MODE, WANDB_DIR, ...). The run's name is `run_name`; in a
hyperparameter search the trial's name, grouped under `run_name` or `output_dir`. Its config is the arguments (and a
transformers model's config); logs go to `train/...`, `eval/...` at `train/global_step`, the end-of-training figures
(`train_runtime`, `train_loss`, ...) to the summary. One difference, said in docs/compat.md: without WANDB_MODE and
with no API key (none in WANDB_API_KEY, no `wandb login`), the run is offline instead of failing on the prompt.
"""

from __future__ import annotations

import logging
import numbers
import os
import tempfile
from enum import Enum
from pathlib import Path
from typing import Any

from trainer.callbacks import TrainerCallback
from trainer.errors import TrainerConfigError
from trainer.integrations.logs import rewrite_logs
from trainer.report_to import missing_package_message

logger = logging.getLogger(__name__)

# logged once at the end of training: the summary holds them (transformers' single_value_scalars)
SUMMARY_ONLY = (
    "train_runtime",
    "train_samples_per_second",
    "train_steps_per_second",
    "train_loss",
    "total_flos",
)


class WandbLogModel(str, Enum):
    CHECKPOINT = "checkpoint"
    END = "end"
    FALSE = "false"

    @classmethod
    def from_env(cls) -> WandbLogModel:
        value = os.environ.get("WANDB_LOG_MODEL", "false").lower()
        if value in ("true", "1"):
            value = "end"  # transformers 4's spelling of "end"
        try:
            return cls(value)
        except ValueError:
            logger.warning("WANDB_LOG_MODEL=%r is not end, checkpoint or false: no model is logged", value)
            return cls.FALSE


def wandb_mode() -> str | None:
    """WANDB_MODE when set; else None (wandb's own choice) with an API key, "offline" without one."""
    mode = os.environ.get("WANDB_MODE")
    if mode:
        return mode
    netrc = Path.home() / ".netrc"
    logged_in = netrc.is_file() and "api.wandb.ai" in netrc.read_text(errors="replace")
    return None if os.environ.get("WANDB_API_KEY") or logged_in else "offline"


def number_of_parameters(model: Any) -> int | None:
    if model is None:
        return None
    counter = getattr(model, "num_parameters", None)
    return int(counter()) if callable(counter) else sum(p.numel() for p in model.parameters())


class WandbCallback(TrainerCallback):
    """Logs metrics, the configuration and (when asked) models to Weights & Biases."""

    def __init__(self) -> None:
        message = missing_package_message("wandb")
        if message is not None:
            raise TrainerConfigError(message)
        import wandb  # here: its import costs about a second, paid only by runs that report to it

        self._wandb = wandb
        self._initialized = False
        self._log_model = WandbLogModel.from_env()

    def setup(self, args, state, model, **kwargs):
        self._initialized = True
        if not state.is_world_process_zero:
            return
        config = args.to_dict()
        model_config = getattr(model, "config", None)
        if model_config is not None:
            config = {
                **(model_config if isinstance(model_config, dict) else model_config.to_dict()),
                **config,
            }
        init_args: dict[str, Any] = {}
        if state.trial_name is not None:
            init_args.update(name=state.trial_name, group=args.run_name or args.output_dir)
        elif args.run_name is not None:
            init_args["name"] = args.run_name
        if self._wandb.run is None:
            self._wandb.init(
                project=os.environ.get("WANDB_PROJECT", "huggingface"), mode=wandb_mode(), **init_args
            )
        self._wandb.config.update(config, allow_val_change=True)
        self._wandb.define_metric("train/global_step")
        self._wandb.define_metric("*", step_metric="train/global_step", step_sync=True)
        watch = os.environ.get("WANDB_WATCH", "false")
        if watch in ("all", "parameters", "gradients") and model is not None:
            self._wandb.watch(model, log=watch, log_freq=max(100, int(args.logging_steps)))
        parameters = number_of_parameters(model)
        if parameters is not None:
            self._wandb.config["model/num_parameters"] = parameters

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if state.is_hyper_param_search:  # each trial its own run
            self._wandb.finish()
            self._initialized = False
        if not self._initialized:
            self.setup(args, state, model)

    def on_log(self, args, state, control, model=None, logs=None, **kwargs):
        if not self._initialized:
            self.setup(args, state, model)
        if not state.is_world_process_zero or not logs:
            return
        for key in SUMMARY_ONLY:
            if key in logs:
                self._wandb.run.summary[key] = logs[key]
        curves = rewrite_logs({k: v for k, v in logs.items() if k not in SUMMARY_ONLY})
        self._wandb.log({**curves, "train/global_step": state.global_step})

    def on_predict(self, args, state, control, metrics=None, **kwargs):
        if not self._initialized:
            self.setup(args, state, kwargs.get("model"))
        if state.is_world_process_zero and metrics:
            self._wandb.log(rewrite_logs(metrics))

    def on_save(self, args, state, control, **kwargs):
        if (
            self._log_model != WandbLogModel.CHECKPOINT
            or not self._initialized
            or not state.is_world_process_zero
        ):
            return
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        artifact = self._wandb.Artifact(name=self._model_name(args), type="model", metadata=self._numbers())
        artifact.add_dir(str(folder))
        aliases = [f"epoch_{round(state.epoch or 0, 2)}", f"checkpoint_global_step_{state.global_step}"]
        self._wandb.log_artifact(artifact, aliases=aliases)

    def on_train_end(self, args, state, control, **kwargs):
        if self._log_model != WandbLogModel.END or not self._initialized or not state.is_world_process_zero:
            return
        trainer = kwargs.get("trainer")
        with tempfile.TemporaryDirectory() as folder:
            trainer.save_model(folder)
            metadata = {**self._numbers(), "final_model": True}
            artifact = self._wandb.Artifact(name=self._model_name(args), type="model", metadata=metadata)
            artifact.add_dir(folder)
            self._wandb.run.log_artifact(artifact, aliases=["final_model"])

    def _model_name(self, args: Any) -> str:
        run = self._wandb.run
        return f"model-{run.id}" if args.run_name in (None, args.output_dir) else f"model-{run.name}"

    def _numbers(self) -> dict[str, Any]:
        summary = dict(self._wandb.run.summary)
        return {k: v for k, v in summary.items() if isinstance(v, numbers.Number) and not k.startswith("_")}
