"""`Trainer.hyperparameter_search`: the Hugging Face API, on the study manager's trial isolation and pruning.

    best = trainer.hyperparameter_search(hp_space=lambda trial: {...}, n_trials=20, direction="maximize")
    best.run_id, best.objective, best.hyperparameters

Same signature and meaning as transformers' (Optuna backend): `hp_space(trial) -> dict` of TrainingArguments values,
`compute_objective(metrics) -> float` (default: eval_loss alone, else the sum of the other metrics), `direction` (or a
list of them), extra keyword arguments to `optuna.create_study` (sampler, pruner, storage, study_name, load_if_exists)
or to `study.optimize` (timeout, n_jobs, gc_after_trial, callbacks, catch). A `model_init` taking one argument gets the
trial, as in transformers.

What differs, on purpose (each is a reported problem with the transformers version):
- each trial trains a new Trainer with a fresh copy of the arguments (the original Trainer's are never mutated) and
  deep copies of the original callbacks (an early-stopping counter never carries over);
- the trial's value is its best evaluation, not its last (`objective="last"` restores the old meaning);
- a pruned trial stops cleanly through the Trainer's control (every callback's on_train_end runs);
- each trial writes into `<output_dir>/run-<number>/`.
Trials run one after another in this process, as in transformers; `hpo run` runs each in a trial process forked from a worker.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import optuna

from hpo.trial.callbacks import TrialIdentityCallback
from hpo.trial.pruning import ObjectiveTracker, OptunaPruningCallback
from trainer import DefaultFlowCallback, PrinterCallback, ProgressCallback, Trainer, TrainingArguments
from trainer.integrations import INTEGRATION_TO_CALLBACK
from trainer.search import register_search_backend

logger = logging.getLogger(__name__)

OPTIMIZE_KWARGS = ("timeout", "n_jobs", "gc_after_trial", "callbacks", "catch", "show_progress_bar")
SPEED_SUFFIXES = ("_runtime", "_per_second", "_compilation_time")


class BestRun(NamedTuple):
    """As transformers' `BestRun`: the trial number as a string, its objective value(s) and its hyperparameters."""

    run_id: str
    objective: float | list[float]
    hyperparameters: dict[str, Any]
    run_summary: Any = None


def default_hp_space_optuna(trial: optuna.Trial) -> dict[str, Any]:
    """transformers' default space for the Optuna backend."""
    return {
        "learning_rate": trial.suggest_float("learning_rate", 1e-6, 1e-4, log=True),
        "num_train_epochs": trial.suggest_int("num_train_epochs", 1, 5),
        "seed": trial.suggest_int("seed", 1, 40),
        "per_device_train_batch_size": trial.suggest_categorical(
            "per_device_train_batch_size", [4, 8, 16, 32, 64]
        ),
    }


def default_compute_objective(metrics: dict[str, float]) -> float:
    """transformers' default: the eval loss when it is the only metric, else the sum of the other metrics."""
    metrics = dict(metrics)
    loss = metrics.pop("eval_loss", None)
    metrics.pop("epoch", None)
    for name in [m for m in metrics if m.endswith(SPEED_SUFFIXES)]:
        metrics.pop(name)
    return loss if len(metrics) == 0 else sum(metrics.values())


def hyperparameter_search(
    trainer: Trainer,
    hp_space: Callable[[optuna.Trial], dict[str, Any]] | None = None,
    compute_objective: Callable[[dict[str, float]], float | list[float]] | None = None,
    n_trials: int = 20,
    direction: str | list[str] = "minimize",
    hp_name: Callable[[optuna.Trial], str] | None = None,
    **kwargs: Any,
) -> BestRun | list[BestRun]:
    """The "optuna" backend of `trainer.Trainer.hyperparameter_search` (registered by this package's entry point)."""
    if trainer.model_init is None:
        raise RuntimeError(
            "To use hyperparameter search, you need to pass your model through a model_init function."
        )
    objective_kind = kwargs.pop("objective", "best")
    if objective_kind not in ("best", "last"):
        raise ValueError(f"objective={objective_kind!r}: use 'best' (the best evaluation) or 'last'")
    optimize_kwargs = {k: kwargs.pop(k) for k in OPTIMIZE_KWARGS if k in kwargs}
    if optimize_kwargs.get("n_jobs", 1) != 1:
        raise ValueError(
            "n_jobs must be 1: threads would share one process's devices; use `hpo run --workers N`"
        )
    directions = [direction] if isinstance(direction, str) else list(direction)
    study = optuna.create_study(directions=directions, **kwargs)
    search = _Search(
        trainer,
        hp_space or default_hp_space_optuna,
        compute_objective or default_compute_objective,
        directions,
        objective_kind,
        hp_name,
    )
    study.optimize(search.objective, n_trials=n_trials, **optimize_kwargs)
    if len(directions) > 1:
        return [BestRun(str(t.number), list(t.values), dict(t.params)) for t in study.best_trials]
    best = study.best_trial
    return BestRun(str(best.number), best.value, dict(best.params))


class _Search:
    """The objective function; holds what every trial starts from, captured before the first trial."""

    def __init__(self, trainer, hp_space, compute_objective, directions, objective_kind, hp_name) -> None:
        self.trainer = trainer
        self.hp_space = hp_space
        self.compute_objective = compute_objective
        self.directions = directions
        self.objective_kind = objective_kind
        self.hp_name = hp_name
        self.base_args = copy.deepcopy(trainer.args)
        self.base_callbacks = copy.deepcopy(_user_callbacks(trainer))
        self.field_names = {f.name for f in dataclasses.fields(self.base_args)}

    def objective(self, trial: optuna.Trial) -> float | list[float]:
        params = dict(self.hp_space(trial) or {})
        args = self._arguments(trial, params)
        tracker = ObjectiveTracker(count_parameters=False)
        callbacks: list[Any] = [TrialIdentityCallback(self._name(trial), params), tracker]
        pruning = None
        if len(self.directions) == 1:
            pruning = OptunaPruningCallback(trial, objective=self.compute_objective)
            callbacks.append(pruning)
        callbacks += copy.deepcopy(self.base_callbacks)  # fresh instances for every trial
        trial_trainer = _trainer_for_trial(self.trainer, args, callbacks, self._model_init(trial))
        # Before train(), as transformers sets them: report_to's trackers read them when training begins (a wandb run
        # per trial, a TensorBoard folder per trial)
        trial_trainer.state.is_hyper_param_search = True
        trial_trainer.state.trial_name, trial_trainer.state.trial_params = self._name(trial), dict(params)
        trial_trainer.train()
        if not tracker.evaluations:
            trial_trainer.evaluate()
        if pruning is not None and pruning.pruned_step is not None:
            trial.set_user_attr("pruned_step", pruning.pruned_step)
            raise optuna.TrialPruned(f"pruned at step {pruning.pruned_step}")
        return self._score(trial, tracker)

    def _arguments(self, trial: optuna.Trial, params: dict[str, Any]) -> TrainingArguments:
        values = {}
        for key, value in params.items():
            if key in self.field_names:
                values[key] = value
            else:
                logger.warning(
                    "hp_space returned %r, which is not a TrainingArguments field; it is not applied", key
                )
        output_dir = str(Path(self.base_args.output_dir) / f"run-{trial.number}")
        return dataclasses.replace(
            self.base_args, **values, output_dir=output_dir, run_name=self._name(trial)
        )

    def _name(self, trial: optuna.Trial) -> str:
        return self.hp_name(trial) if self.hp_name is not None else f"run-{trial.number}"

    def _model_init(self, trial: optuna.Trial) -> Callable[[], Any]:
        model_init = self.trainer.model_init
        if _takes_an_argument(model_init):
            return lambda: model_init(trial)
        return model_init

    def _score(self, trial: optuna.Trial, tracker: ObjectiveTracker) -> float | list[float]:
        scored = [(step, _as_list(self.compute_objective(dict(m)))) for step, m in tracker.evaluations]
        finite = [(s, v) for s, v in scored if all(math.isfinite(x) for x in v)]
        if not finite:
            raise ValueError(f"the objective was never finite: {[v for _, v in scored]}")
        if self.objective_kind == "last":
            step, values = scored[-1]
        else:
            maximize = self.directions[0] == "maximize"
            step, values = (
                max(finite, key=lambda e: e[1][0]) if maximize else min(finite, key=lambda e: e[1][0])
            )
        trial.set_user_attr("best_step", step)
        trial.set_user_attr("run_dir", str(Path(self.base_args.output_dir) / f"run-{trial.number}"))
        return values[0] if len(self.directions) == 1 else values


def _as_list(value: Any) -> list[float]:
    return [float(v) for v in value] if isinstance(value, (list, tuple)) else [float(value)]


def _takes_an_argument(function: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty for p in parameters
    )


def _user_callbacks(trainer: Trainer) -> list[Any]:
    """The callbacks the user gave the Trainer (not the Trainer's own, which each new Trainer adds)."""
    # report_to's trackers too: each trial's Trainer makes its own from the arguments (one run per trial)
    builtin = (DefaultFlowCallback, PrinterCallback, ProgressCallback, *INTEGRATION_TO_CALLBACK.values())
    return [cb for cb in trainer.callback_handler.callbacks if not isinstance(cb, builtin)]


def _trainer_for_trial(
    trainer: Trainer, args: TrainingArguments, callbacks: list[Any], model_init: Callable[[], Any]
) -> Trainer:
    """A new Trainer of the same class with the same data, collator and metrics, and this trial's args/callbacks."""
    return type(trainer)(
        model_init=model_init,
        args=args,
        data_collator=trainer.data_collator,
        train_dataset=trainer.train_dataset,
        eval_dataset=trainer.eval_dataset,
        compute_metrics=trainer.compute_metrics,
        callbacks=callbacks,
        preprocess_logits_for_metrics=trainer.preprocess_logits_for_metrics,
        compute_loss_func=trainer.compute_loss_func,
        processing_class=trainer.processing_class,
    )


# Also on import, for environments where the package's entry points are not installed (a source checkout on sys.path).
register_search_backend("optuna", hyperparameter_search)
