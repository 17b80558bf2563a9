"""The `callbacks:` section of run and study files: Trainer callbacks each run (each trial) gets fresh instances of.

callbacks:
  - early_stopping: {patience: 3, threshold: 0.0}     # stop after 3 evaluations without improvement
  - import: mypackage.callbacks:LogGradients          # any TrainerCallback subclass, by import path
    args: {every: 10}                                 # keyword arguments of its constructor

Built-ins are a closed set (`early_stopping`); anything else is named by import path. Each entry is built anew for every
run or trial (`build_callbacks`), so no state (an early-stopping counter) passes from one trial to the next.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, field_validator, model_validator

from hpo.errors import ConfigError
from hpo.spec.base import Section
from hpo.spec.errors import FieldProblem
from hpo.spec.imports import check_import_path, resolve_callable
from trainer import EarlyStoppingCallback, TrainerCallback


class EarlyStoppingSpec(Section):
    """trainer.EarlyStoppingCallback: stop when `metric_for_best_model` (the study metric in a study) has not improved
    by more than `threshold` for `patience` evaluations in a row."""

    patience: int = Field(1, ge=1)
    threshold: float = Field(0.0, ge=0)

    def build(self) -> EarlyStoppingCallback:
        return EarlyStoppingCallback(
            early_stopping_patience=self.patience, early_stopping_threshold=self.threshold
        )


class CallbackSpec(Section):
    """One entry: a built-in (`early_stopping: {...}`) or `import: module:Class` with `args:`."""

    model_config = ConfigDict(populate_by_name=True)

    early_stopping: EarlyStoppingSpec | None = None
    import_path: str | None = Field(None, alias="import")
    args: dict[str, Any] = {}

    switches = {"early_stopping": "early stopping with its defaults"}

    @field_validator("import_path")
    @classmethod
    def _import_path_shape(cls, value: str | None) -> str | None:
        return None if value is None else check_import_path(value)

    @model_validator(mode="after")
    def _one_kind(self) -> CallbackSpec:
        given = [name for name in ("early_stopping", "import_path") if getattr(self, name) is not None]
        if len(given) != 1:
            raise FieldProblem(
                None,
                "give exactly one of early_stopping: {patience: N} or import: module:Class (with args:)",
            )
        if self.args and self.import_path is None:
            raise FieldProblem("args", "args: belongs to an import: entry; early_stopping takes its own keys")
        return self

    def build(self, *, field: str, base_dir: str | Path | None) -> Any:
        """A new callback instance."""
        if self.early_stopping is not None:
            return self.early_stopping.build()
        assert self.import_path is not None
        factory = resolve_callable(self.import_path, field=f"{field}.import", base_dir=base_dir)
        try:
            callback = factory(**self.args)
        except TypeError as error:
            raise ConfigError(f"{field}.args: {self.import_path} refused them: {error}") from error
        if not isinstance(callback, TrainerCallback):
            raise ConfigError(
                f"{field}.import: {self.import_path} made a {type(callback).__name__}, not a trainer.TrainerCallback"
            )
        return callback


def check_early_stopping(callbacks: list[CallbackSpec], *, evaluates: bool, has_metric: bool) -> None:
    """Early stopping needs evaluations during training and a metric that says which evaluation is best."""
    for index, entry in enumerate(callbacks):
        if entry.early_stopping is None:
            continue
        where = f"callbacks.{index}.early_stopping"
        if not evaluates:
            raise FieldProblem(
                where,
                "needs evaluations during training; set training.eval_strategy: steps (with eval_steps) or epoch",
            )
        if not has_metric:
            raise FieldProblem(
                where,
                "needs a metric to watch; set training.metric_for_best_model (e.g. eval_loss)",
            )


def build_callbacks(callbacks: list[CallbackSpec], base_dir: str | Path | None) -> list[Any]:
    return [
        entry.build(field=f"callbacks.{index}", base_dir=base_dir) for index, entry in enumerate(callbacks)
    ]
