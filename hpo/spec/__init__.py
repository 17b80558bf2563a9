"""Typed, validated run and study files (pydantic v2, unknown keys refused).

    from hpo.spec import load_run_spec, load_study_spec
    spec = load_run_spec("studies/digits_mlp_run.yaml", overrides=["training.learning_rate=3e-4"])
    task = spec.task.resolve()          # the model_init, data, collator, compute_metrics, tokenizer callables
    args = spec.training_arguments()    # a fresh, validated trainer.TrainingArguments

Every problem raises `hpo.errors.ConfigError` (a `SpecError`, with `.problems` as (field path, message) pairs) whose
message names the field path and the fix, e.g. `search_space.learning_rate.low: must be > 0 when log is true`.
"""

from hpo.spec.errors import FieldProblem, SpecError
from hpo.spec.loading import (
    is_study_data,
    load_run_spec,
    load_spec,
    load_study_spec,
    parse_run_spec,
    parse_study_spec,
)
from hpo.spec.optuna_parts import PrunerSpec, SamplerSpec
from hpo.spec.overrides import apply_overrides, parse_overrides
from hpo.spec.run import RunSpec
from hpo.spec.scheduler import SchedulerSpec
from hpo.spec.search_space import ParamSpec
from hpo.spec.sections import ExportSpec, KeepCheckpointsSpec, ResourcesSpec, TrackingSpec, WandbSpec
from hpo.spec.study import StudySection, StudySpec, default_direction, metric_key
from hpo.spec.task import Task, TaskSpec

# A run file or a study file: what the tracking and export code accepts.
Spec = RunSpec | StudySpec

__all__ = [
    "ExportSpec",
    "FieldProblem",
    "KeepCheckpointsSpec",
    "ParamSpec",
    "PrunerSpec",
    "SchedulerSpec",
    "ResourcesSpec",
    "RunSpec",
    "SamplerSpec",
    "Spec",
    "SpecError",
    "StudySection",
    "StudySpec",
    "Task",
    "TaskSpec",
    "TrackingSpec",
    "WandbSpec",
    "apply_overrides",
    "default_direction",
    "is_study_data",
    "load_run_spec",
    "load_spec",
    "load_study_spec",
    "metric_key",
    "parse_overrides",
    "parse_run_spec",
    "parse_study_spec",
]
