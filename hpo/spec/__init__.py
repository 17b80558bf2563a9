"""Typed, validated run and study files (pydantic v2, unknown keys refused).

    from hpo.spec import load_run_spec, load_study_spec
    spec = load_run_spec("studies/digits_mlp_run.yaml", overrides=["training.learning_rate=3e-4"])
    task = spec.task.resolve()          # the model_init, data, collator, compute_metrics, tokenizer callables
    args = spec.training_arguments()    # a fresh, validated trainer.TrainingArguments

Every problem raises `hpo.errors.ConfigError` (a `SpecError`, with `.problems` as (field path, message) pairs) whose
message names the field path and the fix, e.g. `search_space.learning_rate.low: must be > 0 when log is true`.
"""

import importlib
from typing import Any

# Public names, loaded on first use: name -> the module that defines it. So a part (hpo.spec.sections,
# hpo.spec.overrides) imports without the rest (the task's and the callbacks' checks import what they name).
_EXPORTS = {
    "FieldProblem": "hpo.spec.errors",
    "SpecError": "hpo.spec.errors",
    "is_study_data": "hpo.spec.loading",
    "load_run_spec": "hpo.spec.loading",
    "load_spec": "hpo.spec.loading",
    "load_study_spec": "hpo.spec.loading",
    "parse_run_spec": "hpo.spec.loading",
    "parse_study_spec": "hpo.spec.loading",
    "LauncherSpec": "hpo.spec.launcher",
    "PrunerSpec": "hpo.spec.optuna_parts",
    "SamplerSpec": "hpo.spec.optuna_parts",
    "apply_overrides": "hpo.spec.overrides",
    "parse_overrides": "hpo.spec.overrides",
    "RunSpec": "hpo.spec.run",
    "SchedulerSpec": "hpo.spec.scheduler",
    "ParamSpec": "hpo.spec.search_space",
    "ExportSpec": "hpo.spec.sections",
    "KeepCheckpointsSpec": "hpo.spec.sections",
    "MLflowSpec": "hpo.spec.sections",
    "TensorBoardSpec": "hpo.spec.sections",
    "ResourcesSpec": "hpo.spec.sections",
    "TrackingSpec": "hpo.spec.sections",
    "WandbSpec": "hpo.spec.sections",
    "StudySection": "hpo.spec.study",
    "StudySpec": "hpo.spec.study",
    "default_direction": "hpo.spec.study",
    "metric_key": "hpo.spec.study",
    "Task": "hpo.spec.task",
    "TaskSpec": "hpo.spec.task",
}


def __getattr__(name: str) -> Any:
    if name == "Spec":  # a run file or a study file: what the tracking and export code accepts
        return __getattr__("RunSpec") | __getattr__("StudySpec")
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'hpo.spec' has no attribute {name!r}")


__all__ = [
    "ExportSpec",
    "FieldProblem",
    "KeepCheckpointsSpec",
    "LauncherSpec",
    "MLflowSpec",
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
    "TensorBoardSpec",
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
