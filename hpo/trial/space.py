"""Sampling a trial's parameters from the study file's `search_space` (validated by `hpo.spec.search_space`).

    learning_rate: {type: float, low: 1.0e-4, high: 1.0e-1, log: true}
    optimizer:     {type: categorical, choices: [adamw_torch, sgd]}
    momentum:      {type: float, low: 0.0, high: 0.99, when: {optimizer: sgd}}   # sampled only for sgd
    hidden_size:   {type: int, low: 32, high: 256, step: 32}                     # -> model_init(params)
    dropout:       {type: fixed, value: 0.1, target: model}

Where each value goes (TrainingArguments or `model_init(params)`) is the spec's business: `StudySpec.split_params`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna

from hpo.errors import ConfigError
from hpo.spec import ParamSpec

AnyTrial = optuna.Trial | optuna.trial.FixedTrial


def _condition_holds(when: Mapping[str, Any] | None, params: Mapping[str, Any]) -> bool:
    """`when: {other: value}` holds when every named parameter was chosen and has that value (a list means any of)."""
    for other, expected in (when or {}).items():
        if other not in params:
            return False
        allowed = expected if isinstance(expected, list) else [expected]
        if params[other] not in allowed:
            return False
    return True


def _ordered(search_space: Mapping[str, ParamSpec]) -> list[tuple[str, ParamSpec]]:
    """Parameters in an order where each comes after the parameters its `when:` names (the file's order otherwise).
    The spec has refused unknown names and cycles; the check here guards spaces built in code."""
    pending = list(search_space.items())
    ordered: list[tuple[str, ParamSpec]] = []
    placed: set[str] = set()
    while pending:
        ready = [(name, param) for name, param in pending if set(param.when or {}) <= placed]
        if not ready:
            cycle = ", ".join(name for name, _ in pending)
            raise ConfigError(
                f"search_space: the `when:` conditions of {cycle} form a cycle or name an unknown parameter"
            )
        ordered.extend(ready)
        placed.update(name for name, _ in ready)
        pending = [(name, param) for name, param in pending if name not in placed]
    return ordered


def suggest(trial: AnyTrial, name: str, param: ParamSpec) -> Any:
    """One value from an optuna trial (or FixedTrial) for a parameter."""
    if param.type == "fixed":
        return param.value
    if param.type == "float":
        return trial.suggest_float(name, param.low, param.high, step=param.step, log=param.log)
    if param.type == "int":
        return trial.suggest_int(
            name, int(param.low), int(param.high), step=int(param.step or 1), log=param.log
        )
    return trial.suggest_categorical(name, list(param.choices or []))


def sample_params(trial: AnyTrial, search_space: Mapping[str, ParamSpec]) -> dict[str, Any]:
    """The trial's parameters: every unconditional parameter, and each conditional one whose `when:` holds.

    Fixed values are included without asking the sampler, so they never widen the space samplers model."""
    params: dict[str, Any] = {}
    for name, param in _ordered(search_space):
        if _condition_holds(param.when, params):
            params[name] = suggest(trial, name, param)
    return params
