"""`report_to="mlflow"`: transformers' `MLflowCallback`, one MLflow run per training.

Environment, as transformers reads it: MLFLOW_TRACKING_URI (unset: MLflow's default, `sqlite:///mlflow.db` in the
current folder since MLflow 3.7), MLFLOW_EXPERIMENT_NAME (created when missing), MLFLOW_RUN_ID (continue that run, for
a resumed training), MLFLOW_NESTED_RUN (a child of the active run), MLFLOW_TAGS (a JSON object of tags),
MLFLOW_FLATTEN_PARAMS, MLFLOW_MAX_LOG_PARAMS, HF_MLFLOW_LOG_ARTIFACTS (each checkpoint as artifacts of the run) and
DISABLE_MLFLOW_INTEGRATION (leaves mlflow out of "all"). Params (the arguments, a transformers model's config) once at
the start, every log record's numbers as metrics at the global step, the run ended at the end of training when this
callback started it. One difference, said in docs/compat.md: a checkpoint is logged as the checkpoint's files
(`mlflow.log_artifacts`), not wrapped in a pyfunc model, which needs the full `mlflow` package.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

from trainer.callbacks import TrainerCallback
from trainer.errors import TrainerConfigError
from trainer.integrations.logs import env_flag
from trainer.report_to import missing_package_message

logger = logging.getLogger(__name__)


def import_mlflow() -> Any:
    """mlflow, imported here: its import costs one to two seconds, paid only by runs that report to it."""
    message = missing_package_message("mlflow")
    if message is not None:
        raise TrainerConfigError(message)
    import mlflow

    return mlflow


def flatten(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}, as transformers' flatten_dict (MLFLOW_FLATTEN_PARAMS)."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        flat.update(flatten(value, f"{name}.") if isinstance(value, dict) else {name: value})
    return flat


def metric_name(name: str) -> str:
    """MLflow refuses some characters in metric names (parentheses...): replaced by "_", as transformers does."""
    return re.sub(r"[^0-9A-Za-z_\-\.\ :/]", "_", name)


def log_params(mlflow: Any, params: dict[str, Any]) -> None:
    """Params in batches MLflow accepts, leaving out values longer than MLflow takes (with a warning)."""
    from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH, MAX_PARAMS_TAGS_PER_BATCH

    kept = {}
    for name, value in params.items():
        if len(str(value)) > MAX_PARAM_VAL_LENGTH:
            logger.warning(
                "MLflow: param %r is longer than %d characters; left out", name, MAX_PARAM_VAL_LENGTH
            )
        else:
            kept[name] = value
    items = list(kept.items())
    for start in range(0, len(items), MAX_PARAMS_TAGS_PER_BATCH):
        mlflow.log_params(dict(items[start : start + MAX_PARAMS_TAGS_PER_BATCH]), synchronous=False)


def numeric_metrics(logs: dict[str, Any]) -> dict[str, float]:
    """The numbers of a log record (a one-element tensor too), under names MLflow takes."""
    metrics = {}
    for key, value in logs.items():
        if hasattr(value, "numel") and value.numel() == 1:
            value = value.item()
        if isinstance(value, int | float) and not isinstance(value, bool):
            metrics[metric_name(key)] = value
        else:
            logger.debug("MLflow: %r of %r is not a number; not logged as a metric", value, key)
    return metrics


class MLflowCallback(TrainerCallback):
    """Sends the parameters and the logs to MLflow."""

    def __init__(self) -> None:
        self._ml_flow = import_mlflow()
        self._initialized = False
        self._auto_end_run = False
        self._log_artifacts = False

    def setup(self, args, state, model):
        self._initialized = True
        self._log_artifacts = env_flag("HF_MLFLOW_LOG_ARTIFACTS")
        if not state.is_world_process_zero:
            return
        mlflow = self._ml_flow
        tracking_uri = os.environ.get("MLFLOW_TRACKING_URI")
        if tracking_uri and not mlflow.is_tracking_uri_set():
            mlflow.set_tracking_uri(tracking_uri)
        nested, run_id = env_flag("MLFLOW_NESTED_RUN"), os.environ.get("MLFLOW_RUN_ID")
        if mlflow.active_run() is None or nested or run_id:
            experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME")
            if experiment:
                mlflow.set_experiment(experiment)  # creates it when missing
            # MLFLOW_RUN_ID is read by start_run itself: it continues that run
            mlflow.start_run(run_name=args.run_name, nested=nested)
            self._auto_end_run = True
        params = args.to_dict()
        model_config = getattr(model, "config", None)
        if model_config is not None and hasattr(model_config, "to_dict"):
            params = {**model_config.to_dict(), **params}
        if env_flag("MLFLOW_FLATTEN_PARAMS"):
            params = flatten(params)
        limit = os.environ.get("MLFLOW_MAX_LOG_PARAMS", "")
        if limit.isdigit():
            params = dict(list(params.items())[: int(limit)])
        log_params(mlflow, params)
        tags = os.environ.get("MLFLOW_TAGS")
        if tags:
            mlflow.set_tags(json.loads(tags))

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if not self._initialized:
            self.setup(args, state, model)

    def on_log(self, args, state, control, logs=None, model=None, **kwargs):
        if not self._initialized:
            self.setup(args, state, model)
        if state.is_world_process_zero and logs:
            self._ml_flow.log_metrics(numeric_metrics(logs), step=state.global_step, synchronous=False)

    def on_save(self, args, state, control, **kwargs):
        if not (self._initialized and state.is_world_process_zero and self._log_artifacts):
            return
        name = f"checkpoint-{state.global_step}"
        self._ml_flow.log_artifacts(str(Path(args.output_dir) / name), artifact_path=name)

    def on_train_end(self, args, state, control, **kwargs):
        if self._initialized and state.is_world_process_zero and self._auto_end_run:
            if self._ml_flow.active_run() is not None:
                self._ml_flow.end_run()  # also waits for the metrics logged without waiting
            self._auto_end_run = False

    def __del__(self) -> None:
        # A run left open (training raised) would stop the next start_run of this process: end it, as transformers.
        if getattr(self, "_auto_end_run", False) and self._ml_flow.active_run() is not None:
            self._ml_flow.end_run()
