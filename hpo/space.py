"""The search space of a study: sampling a trial's parameters and routing them to TrainingArguments or `model_init`.

A study file's `search_space` maps a name to a parameter, e.g.

    learning_rate: {type: float, low: 1.0e-4, high: 1.0e-1, log: true}
    optimizer:     {type: categorical, choices: [adamw_torch, sgd]}
    momentum:      {type: float, low: 0.0, high: 0.99, when: {optimizer: sgd}}   # sampled only for sgd
    hidden_size:   {type: int, low: 32, high: 256, step: 32}                     # -> model_init(params)
    dropout:       {type: fixed, value: 0.1, target: model}

A key that names a TrainingArguments field goes to the trial's arguments, any other key to `model_init(params)` (and to
`data(params)`); `target: model | training` overrides that (`hpo.spec` resolves each target when it validates the file).
Parameters are read by attribute or by key, so the pydantic models of `hpo.spec` and plain dicts both work.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hpo.errors import ConfigError

SAMPLED_TYPES = ("float", "int", "categorical")


def _get(param: Any, key: str, default: Any = None) -> Any:
    """A field of a parameter, whether it is a pydantic model or a dict."""
    if isinstance(param, Mapping):
        return param.get(key, default)
    return getattr(param, key, default)


def _items(search_space: Any) -> list[tuple[str, Any]]:
    if search_space is None:
        return []
    if isinstance(search_space, Mapping):
        return list(search_space.items())
    return list(dict(search_space).items())


def _condition_holds(name: str, when: Mapping[str, Any] | None, params: Mapping[str, Any]) -> bool:
    """`when: {other: value}` holds when every named parameter was chosen and has that value (a list means any of)."""
    for other, expected in (when or {}).items():
        if other not in params:
            return False
        allowed = expected if isinstance(expected, list) else [expected]
        if params[other] not in allowed:
            return False
    return True


def _ordered(search_space: Any) -> list[tuple[str, Any]]:
    """Parameters in an order where each comes after the parameters its `when:` names (the file's order otherwise)."""
    pending = _items(search_space)
    names = {name for name, _ in pending}
    ordered: list[tuple[str, Any]] = []
    placed: set[str] = set()
    while pending:
        ready = [(n, p) for n, p in pending if set(_get(p, "when") or {}) <= placed]
        if not ready:
            cycle = ", ".join(n for n, _ in pending)
            raise ConfigError(
                f"search_space: the `when:` conditions of {cycle} form a cycle; make one unconditional"
            )
        for name, param in ready:
            for other in _get(param, "when") or {}:
                if other not in names:
                    raise ConfigError(
                        f"search_space.{name}.when: names '{other}', which is not in search_space; "
                        f"use one of: {', '.join(sorted(names))}"
                    )
            ordered.append((name, param))
            placed.add(name)
        pending = [(n, p) for n, p in pending if n not in placed]
    return ordered


def suggest(trial: Any, name: str, param: Any) -> Any:
    """One value from an optuna trial (or FixedTrial) for a parameter."""
    kind = _get(param, "type")
    if kind == "fixed":
        return _get(param, "value")
    if kind == "float":
        return trial.suggest_float(
            name,
            _get(param, "low"),
            _get(param, "high"),
            step=_get(param, "step"),
            log=bool(_get(param, "log")),
        )
    if kind == "int":
        return trial.suggest_int(
            name,
            _get(param, "low"),
            _get(param, "high"),
            step=_get(param, "step") or 1,
            log=bool(_get(param, "log")),
        )
    if kind == "categorical":
        return trial.suggest_categorical(name, list(_get(param, "choices")))
    raise ConfigError(f"search_space.{name}.type: '{kind}' is not one of float, int, categorical, fixed")


def sample_params(trial: Any, search_space: Any) -> dict[str, Any]:
    """The trial's parameters: every unconditional parameter, and each conditional one whose `when:` holds.

    Fixed values are included without asking the sampler, so they never widen the space samplers model."""
    params: dict[str, Any] = {}
    for name, param in _ordered(search_space):
        if _condition_holds(name, _get(param, "when"), params):
            params[name] = suggest(trial, name, param)
    return params


def split_params(spec: Any, params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(TrainingArguments overrides, model_init params): by each parameter's resolved `target` (a TrainingArguments
    field name goes to the arguments unless `target:` says otherwise); model params start from the file's `model:`."""
    return spec.split_params(dict(params))
