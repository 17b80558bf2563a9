"""Checks that need the task's code but no training: import every callable, build the model and the data, and run one
evaluation on a few eval samples, so that a metric evaluation will never produce is refused before any trial starts.
"""

from __future__ import annotations

import tempfile
from typing import Any

import torch
from torch.utils.data import Subset

from hpo.errors import ConfigError
from hpo.spec import RunSpec, StudySpec, Task, metric_key
from hpo.trial.adapter import check_choices, wrap_model
from trainer import PrinterCallback, ProgressCallback, Trainer, TrainingArguments

DRY_RUN_SAMPLES = 16
# Metrics the study manager adds to every evaluation itself (see hpo.trial.pruning.ObjectiveTracker).
ADDED_BY_STUDY = ("eval_num_parameters",)


def representative_params(spec: StudySpec) -> dict[str, Any]:
    """One point of the search space: the low end of ranges, the first choice, fixed values, honouring `when:`."""
    params: dict[str, Any] = {}
    decided: set[str] = set()  # sampled, or left out because their condition does not hold
    pending = dict(spec.search_space)
    while pending:
        ready = [name for name, p in pending.items() if set(p.when or {}) <= decided]
        if not ready:  # a cycle; the schema refuses those already
            break
        for name in ready:
            param = pending.pop(name)
            decided.add(name)
            if _condition_holds(param.when, params):
                params[name] = param.extremes()[0]
    return params


def _condition_holds(when: dict[str, Any] | None, params: dict[str, Any]) -> bool:
    for other, expected in (when or {}).items():
        allowed = expected if isinstance(expected, list) else [expected]
        if other not in params or params[other] not in allowed:
            return False
    return True


def dry_run(spec: RunSpec | StudySpec) -> dict[str, float]:
    """Evaluate the untrained model on a few eval samples; return the metrics and refuse missing objective metrics."""
    task = spec.resolve_task()
    peft_params: dict[str, Any] = {}
    if isinstance(spec, StudySpec):
        representative = representative_params(spec)
        training_params, model_params = spec.split_params(representative)
        peft_params = spec.peft_params(representative)
        wanted = {
            f"study.metric{'s' if spec.study.is_multi_objective else ''}": list(spec.study.metrics or [])
        }
    else:
        training_params, model_params = {}, dict(spec.model)
        wanted = {}
    with tempfile.TemporaryDirectory(prefix="hpo-dry-run-") as folder:
        args = spec.training_arguments(output_dir=folder, **training_params)
        if args.metric_for_best_model:
            wanted["training.metric_for_best_model"] = [metric_key(args.metric_for_best_model)]
        metrics = _evaluate(task, args, model_params, spec.peft, peft_params, _searched_targets(spec))
    give_back_gpu_memory()
    produced = set(metrics) | set(ADDED_BY_STUDY)
    for field, names in wanted.items():
        missing = [name for name in names if name not in produced]
        if missing:
            raise ConfigError(
                f"{spec.source}: {field}: evaluation does not produce {', '.join(missing)}; it produces "
                f"{', '.join(sorted(produced))} (add the metric to task.compute_metrics, or pick one of these)"
            )
    return metrics


def give_back_gpu_memory() -> None:
    """The dry run's model and batches are gone once `_evaluate` returns, but PyTorch's caching allocator keeps their
    GPU memory reserved: `hpo run` held 11.5 GiB of an H200 through the whole study (2026-12-04), memory its trials
    could not use. Only the CUDA context stays (about 0.5 GiB)."""
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _searched_targets(spec: RunSpec | StudySpec) -> dict[str, list[Any]]:
    """Every value a searched target_modules can take: each must match a layer of the model."""
    if not isinstance(spec, StudySpec) or spec.peft is None:
        return {}
    param = spec.search_space.get("target_modules")
    if param is None or param.target != "peft":
        return {}
    return {"target_modules": list(param.choices or [param.value])}


def _evaluate(
    task: Task,
    args: TrainingArguments,
    model_params: dict[str, Any],
    peft_section: dict[str, Any] | None = None,
    peft_params: dict[str, Any] | None = None,
    target_choices: dict[str, list[Any]] | None = None,
) -> dict[str, float]:
    try:
        train_dataset, eval_dataset = task.data(model_params)
        model = task.model_init(model_params)
    except Exception as error:
        raise ConfigError(f"model/data: the task refused the parameters {model_params}: {error}") from error
    if peft_section is not None:  # a bad adapter is a bad file: exit 2 before any trial
        check_choices(model, peft_section, target_choices or {})
        model = wrap_model(model, peft_section, peft_params)
    if eval_dataset is None:
        return {}
    trainer = Trainer(
        model=model,
        args=args,
        eval_dataset=_head(eval_dataset),
        data_collator=task.collator,
        compute_metrics=task.compute_metrics,
    )
    for quiet in (PrinterCallback, ProgressCallback):  # a check, not a run: no progress output
        trainer.pop_callback(quiet)
    return trainer.evaluate()


def _head(dataset: Any) -> Any:
    """The first few samples of a dataset (or of each dataset of a dict)."""
    if isinstance(dataset, dict):
        return {name: _head(part) for name, part in dataset.items()}
    if isinstance(dataset, list):
        return dataset[:DRY_RUN_SAMPLES]
    return Subset(dataset, range(min(DRY_RUN_SAMPLES, len(dataset))))
