"""The refusal that needs the task's own code: an objective metric that evaluation does not produce.

`hpo.spec` refuses, from the file alone, a pruner with several objectives and a pruner while evaluation is off. Whether
evaluation produces `eval_f1` only the task's code can tell: without this check every trial would train to its end and
then fail. A dry run tells before any trial starts: the task builds its model (at the low end of the search space) and
data, and the Trainer evaluates a few eval samples through `compute_metrics`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hpo.errors import ConfigError
from hpo.objectives import study_metrics
from hpo.space import default_params, split_params

DRY_RUN_SAMPLES = 8


def check_study(spec: Any, *, dry_run: bool = True) -> None:
    """Raise ConfigError (exit 2) naming the field and the fix when evaluation cannot give the study's objective."""
    if dry_run:
        _check_metrics_produced(spec, study_metrics(spec.study))


def _check_metrics_produced(spec: Any, metrics: list[str]) -> None:
    try:
        produced = dry_run_metrics(spec)
    except ConfigError:
        raise
    except Exception as error:  # noqa: BLE001 - the task's own code failed: say where, exit 2
        raise ConfigError(
            f"task: a dry run of evaluation (model_init, data, compute_metrics on {DRY_RUN_SAMPLES} eval samples) "
            f"failed: {type(error).__name__}: {error}"
        ) from error
    missing = [m for m in metrics if m not in produced]
    if missing:
        field = "study.metrics" if len(metrics) > 1 else "study.metric"
        available = ", ".join(sorted(k for k in produced if k.startswith("eval_")))
        raise ConfigError(
            f"{field}: evaluation does not produce {', '.join(missing)}; a dry run of evaluate() "
            f"(with task.compute_metrics) gives: {available}. Name one of those, or return it from compute_metrics"
        )


def dry_run_metrics(spec: Any) -> dict[str, float]:
    """The metric keys one evaluation produces: the task's model (at the search space's low end) on a few samples."""
    from hpo.pruning import ObjectiveTracker
    from trainer import Trainer, set_seed

    task = spec.task.resolve()
    params = default_params(spec.search_space)
    training, model_params = split_params(spec, params)
    train_dataset, eval_dataset = task.data(dict(model_params))
    if eval_dataset is None:
        raise ConfigError("task.data: returned no eval dataset; a study's objective is an evaluation metric")
    tracker = ObjectiveTracker()
    with tempfile.TemporaryDirectory() as tmp:
        args = spec.training_arguments(str(Path(tmp) / "dry-run"), **training)
        set_seed(args.seed)
        trainer = Trainer(
            model_init=lambda: task.model_init(dict(model_params)),
            args=args,
            train_dataset=train_dataset,
            eval_dataset=_head(eval_dataset),
            data_collator=task.collator,
            compute_metrics=task.compute_metrics,
            callbacks=[tracker],
        )
        metrics = trainer.evaluate()
    return {**metrics, **(tracker.evaluations[-1][1] if tracker.evaluations else {})}


def _head(dataset: Any) -> Any:
    """The first few samples of an eval dataset (or of each, for a dict of them)."""
    if isinstance(dataset, dict):
        return {name: _head(d) for name, d in dataset.items()}
    if hasattr(dataset, "select"):  # a `datasets.Dataset`
        return dataset.select(range(min(DRY_RUN_SAMPLES, len(dataset))))
    if hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__"):
        from torch.utils.data import Subset

        return Subset(dataset, range(min(DRY_RUN_SAMPLES, len(dataset))))
    return dataset
