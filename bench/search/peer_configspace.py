"""The study's search space as a ConfigSpace space, for SMAC3 and DEHB (peer_smac.py, peer_dehb.py), in their
environment. Log ranges, integer ranges (an integer with a step is an ordinal of its values), categoricals, and the
study's conditions (`when:`) as ConfigSpace conditions, so both optimisers see the space `hpo run` samples."""

from __future__ import annotations

from typing import Any


def configuration_space(space: dict[str, dict[str, Any]], seed: int) -> Any:
    from ConfigSpace import (
        CategoricalHyperparameter,
        ConfigurationSpace,
        InCondition,
        OrdinalHyperparameter,
        UniformFloatHyperparameter,
        UniformIntegerHyperparameter,
    )

    cs = ConfigurationSpace(seed=seed)
    made: dict[str, Any] = {}
    for name, p in space.items():
        if p["type"] == "categorical":
            made[name] = CategoricalHyperparameter(name, list(p["choices"]))
        elif p["type"] == "float":
            made[name] = UniformFloatHyperparameter(
                name, float(p["low"]), float(p["high"]), log=bool(p.get("log"))
            )
        elif p["type"] == "int" and int(p.get("step") or 1) != 1:
            made[name] = OrdinalHyperparameter(
                name, list(range(int(p["low"]), int(p["high"]) + 1, int(p["step"])))
            )
        elif p["type"] == "int":
            made[name] = UniformIntegerHyperparameter(
                name, int(p["low"]), int(p["high"]), log=bool(p.get("log"))
            )
        else:
            raise ValueError(f"parameter {name}: type {p['type']} is not mapped to ConfigSpace")
    cs.add(list(made.values()))
    for name, p in space.items():
        for parent, allowed in (p.get("when") or {}).items():
            values = allowed if isinstance(allowed, list) else [allowed]
            cs.add(InCondition(made[name], made[parent], values))
    return cs


def as_params(configuration: Any) -> dict[str, Any]:
    """A Configuration as the plain dict a study's trial would hold (inactive parameters absent)."""
    return {
        name: value.item() if hasattr(value, "item") else value for name, value in dict(configuration).items()
    }
