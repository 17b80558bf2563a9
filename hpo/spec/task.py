"""The `task:` section: which code builds the model, the data and the metrics, named by `module:function` paths."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import PrivateAttr, field_validator

from hpo.errors import ConfigError
from hpo.spec.base import Section
from hpo.spec.imports import check_import_path, resolve_callable


@dataclass(frozen=True)
class Task:
    """The resolved callables of a task.

    model_init(params) -> nn.Module; data(params) -> (train_dataset, eval_dataset or dict of them or None);
    collator(features) -> batch, or None; compute_metrics(EvalPrediction) -> dict, or None;
    tokenizer() -> a tokenizer for exports of transformers models, or None.
    `model_init` and `data` defined without a parameter are called without one. A `data()` without a parameter gives
    every trial the same datasets, so it runs once per process (`shared_data`): a worker loads them before it forks its
    trials, which share them copy-on-write, instead of each trial loading (and tokenizing) them again.
    """

    model_init: Callable[[dict[str, Any]], Any]
    data: Callable[[dict[str, Any]], Any]
    collator: Callable[..., Any] | None = None
    compute_metrics: Callable[..., Any] | None = None
    tokenizer: Callable[[], Any] | None = None
    # Model hyperparameters a running model can take on (PBT): name -> set(model, value).
    mutable: dict[str, Callable[[Any, Any], None]] = field(default_factory=dict)
    shared_data: bool = False  # data() takes no parameters: loaded once per process


class TaskSpec(Section):
    model_init: str
    data: str
    collator: str | None = None
    compute_metrics: str | None = None
    tokenizer: str | None = None
    mutable: dict[
        str, str
    ] = {}  # model parameters PBT may change mid-run, e.g. {dropout: my_task:set_dropout}

    # The folder of the YAML file: modules next to it are importable.
    _base_dir: str | None = PrivateAttr(default=None)
    # The YAML file itself, so an import error names it like every other field error does.
    _source: str | None = PrivateAttr(default=None)

    @field_validator("model_init", "data", "collator", "compute_metrics", "tokenizer")
    @classmethod
    def _import_path_shape(cls, value: str | None) -> str | None:
        return None if value is None else check_import_path(value)

    @field_validator("mutable")
    @classmethod
    def _mutable_paths(cls, value: dict[str, str]) -> dict[str, str]:
        return {name: check_import_path(path) for name, path in value.items()}

    @property
    def base_dir(self) -> str | None:
        """The folder of the file that named this task; its modules are importable from there."""
        return self._base_dir

    def with_base_dir(self, base_dir: str | Path | None, source: str | None = None) -> TaskSpec:
        self._base_dir = None if base_dir is None else str(base_dir)
        self._source = source
        return self

    def resolve(self) -> Task:
        """Import every named callable; a ConfigError names the field (`task.data`) and what is missing."""

        prefix = f"{self._source}: " if self._source else ""

        def load(name: str, arity: int | None) -> Callable[..., Any] | None:
            path = getattr(self, name)
            if path is None:
                return None
            field = f"{prefix}task.{name}"
            function = resolve_callable(path, field=field, base_dir=self._base_dir)
            return function if arity is None else _adapt(function, arity, field=field)

        data = load("data", 1)
        if isinstance(data, _WithoutParams):  # the same datasets for every trial
            data = _LoadedOnce(data.function)
        return Task(
            model_init=load("model_init", 1),
            data=data,
            collator=load("collator", None),
            compute_metrics=load("compute_metrics", None),
            tokenizer=load("tokenizer", 0),
            mutable={
                name: resolve_callable(path, field=f"{prefix}task.mutable.{name}", base_dir=self._base_dir)
                for name, path in self.mutable.items()
            },
            shared_data=isinstance(data, _LoadedOnce),
        )


def _adapt(function: Callable[..., Any], arity: int, *, field: str) -> Callable[..., Any]:
    """Accept `def data(params)` and `def data()` alike; refuse a function that needs more arguments."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # builtins without a signature: call as the contract says
        return function
    required = [
        p
        for p in signature.parameters.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    takes_any = any(p.kind == p.VAR_POSITIONAL for p in signature.parameters.values())
    positional = [
        p for p in signature.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if len(required) > arity:
        expected = "(params)" if arity == 1 else "()"
        raise ConfigError(
            f"{field}: {function.__qualname__}{signature} needs {len(required)} arguments; it must "
            f"be callable as {function.__name__}{expected}"
        )
    if arity == 1 and not positional and not takes_any:
        return _WithoutParams(function)
    return function


class _WithoutParams:
    """A task function defined without a parameter, callable as `f(params)` like the others."""

    def __init__(self, function: Callable[[], Any]) -> None:
        self.function = function
        functools.update_wrapper(self, function)

    def __call__(self, params: dict[str, Any] | None = None) -> Any:
        return self.function()


# The datasets of each parameterless data() this process has loaded, by function. A forked trial inherits the
# worker's entries; what a trial changes in its copy stays in that trial's process.
_LOADED_DATA: dict[Callable[[], Any], Any] = {}


class _LoadedOnce(_WithoutParams):
    """A parameterless data(): the same datasets for every trial, so loaded once per process."""

    def __call__(self, params: dict[str, Any] | None = None) -> Any:
        if self.function not in _LOADED_DATA:
            _LOADED_DATA[self.function] = self.function()
        return _LOADED_DATA[self.function]
