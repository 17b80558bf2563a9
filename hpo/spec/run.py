"""The run file of `hpo train`: one training run of a task with fixed model parameters and training arguments.

name: digits_mlp                       # default: the file's name
output_dir: runs/digits_mlp            # default: runs/<name>; `hpo train --output-dir` wins
task: {model_init: studies.tasks.digits:model_init, data: studies.tasks.digits:data,
       compute_metrics: studies.tasks.digits:compute_metrics}
model: {hidden_size: 128}              # passed to model_init(params) and data(params)
training: {learning_rate: 1.0e-3, num_train_epochs: 10}   # TrainingArguments fields
tracking: {store: true, wandb: {project: digits, mode: offline}}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from pydantic import PrivateAttr, field_validator, model_validator

from hpo.spec import adapters
from hpo.spec.base import Section
from hpo.spec.callbacks import CallbackSpec, build_callbacks, check_early_stopping
from hpo.spec.errors import FieldProblem, SpecError, join_path
from hpo.spec.extras import check_strategy_installed
from hpo.spec.names import check_plain_name
from hpo.spec.reporting import check_run_report_to
from hpo.spec.sections import ExportSpec, TrackingSpec
from hpo.spec.task import Task, TaskSpec
from hpo.spec.training import build_training_arguments, check_training_keys, read_strategies
from trainer.strategy_names import resolve_strategy_name

STUDY_ONLY = (
    "a study file key; run a study with `hpo run`, or drop it to train one configuration with `hpo train`"
)


class RunSpec(Section):
    moved_fields: ClassVar[dict[str, str]] = {
        "study": STUDY_ONLY,
        "search_space": STUDY_ONLY,
        "resources": STUDY_ONLY,
    }

    name: str | None = None
    output_dir: str | None = None
    task: TaskSpec
    model: dict[str, Any] = {}
    training: dict[str, Any] = {}
    callbacks: list[CallbackSpec] = []  # e.g. [{early_stopping: {patience: 3}}] (hpo.spec.callbacks)
    tracking: TrackingSpec = TrackingSpec()
    export: ExportSpec = ExportSpec()
    peft: dict[str, Any] | None = None  # train an adapter: {method: lora, r: 8, ...} (hpo.spec.adapters)

    _source: str | None = PrivateAttr(default=None)

    @field_validator("training")
    @classmethod
    def _training_keys(cls, training: dict[str, Any]) -> dict[str, Any]:
        check_training_keys(training)  # here, so a misspelt key is reported beside other field problems
        return read_strategies(training)

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str | None) -> str | None:
        return None if value is None else check_plain_name(value, output_field="output_dir")

    @model_validator(mode="after")
    def _check_training(self) -> RunSpec:
        if self.peft is not None:
            adapters.check_section(self.peft)
            adapters.check_strategy(self.training)
        args = check_training(self.training, prefix="training")
        check_run_report_to(args, self.tracking)
        field = (
            "training.strategy" if self.training.get("strategy", "auto") != "auto" else "training.deepspeed"
        )
        check_strategy_installed(field, resolve_strategy_name(args, world_size=1))
        evaluates = str(getattr(args.eval_strategy, "value", args.eval_strategy)) != "no"
        check_early_stopping(
            self.callbacks, evaluates=evaluates, has_metric=args.best_metric_name is not None
        )
        return self

    def build_callbacks(self) -> list[Any]:
        """Fresh instances of the file's `callbacks:`."""
        return build_callbacks(self.callbacks, self.task.base_dir)

    @property
    def source(self) -> str | None:
        """The path of the file this spec was loaded from, if any."""
        return self._source

    def resolve_task(self) -> Task:
        return self.task.resolve()

    def training_arguments(self, **overrides: Any) -> Any:
        """A fresh TrainingArguments for this run (never shared, so a caller may change it freely)."""
        output_dir = overrides.pop("output_dir", None) or self.output_dir or "runs/run"
        try:
            return build_training_arguments(self.training, str(output_dir), **overrides)
        except FieldProblem as problem:
            raise SpecError(
                self._source or "run", [(join_path("training", problem.field), problem.message)]
            ) from problem


def check_training(training: dict[str, Any], *, prefix: str, **overrides: Any) -> Any:
    """Build TrainingArguments from a `training:` mapping, re-raising a problem with its full field path."""
    try:
        return build_training_arguments(training, str(Path("unused-output-dir")), **overrides)
    except FieldProblem as problem:
        raise FieldProblem(join_path(prefix, problem.field), problem.message) from problem
