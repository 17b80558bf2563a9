"""The `search_space:` section: one entry per hyperparameter.

    learning_rate: {type: float, low: 1e-5, high: 1e-2, log: true}
    hidden_size:   {type: int, low: 32, high: 256, step: 32}
    activation:    {type: categorical, choices: [relu, gelu]}
    dropout:       {type: float, low: 0.0, high: 0.5, when: {activation: gelu}}   # sampled only when the condition holds
    seed:          {type: fixed, value: 0, target: model}

A parameter named like a TrainingArguments field goes to the arguments, one named like an option of the file's `peft:`
method to the adapter's config (hpo.spec.adapters), any other to `model_init(params)`; `target:` overrides that. The study spec fills in `target` once it knows the TrainingArguments fields.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import model_validator

from hpo.spec.base import Section
from hpo.spec.errors import FieldProblem

ParamType = Literal["float", "int", "categorical", "fixed"]
Scalar = bool | int | float | str | None

# Which keys each type uses; a key of another type is a mistake worth naming.
_USES = {
    "float": {"low", "high", "step", "log"},
    "int": {"low", "high", "step", "log"},
    "categorical": {"choices"},
    "fixed": {"value"},
}
_ALL_KEYS = {"low", "high", "step", "log", "choices", "value"}


class ParamSpec(Section):
    type: ParamType
    low: int | float | None = None
    high: int | float | None = None
    step: int | float | None = None
    log: bool = False
    choices: list[Scalar] | None = None
    value: Any = None
    when: dict[str, Scalar | list[Scalar]] | None = None
    target: Literal["model", "training", "peft"] | None = None

    @model_validator(mode="after")
    def _check(self) -> ParamSpec:
        self._check_keys_used()
        if self.type in ("float", "int"):
            self._check_range()
        elif self.type == "categorical":
            if not self.choices:
                raise FieldProblem("choices", "must list at least one value, e.g. choices: [relu, gelu]")
        return self

    def _check_keys_used(self) -> None:
        given = {key for key in self.model_fields_set if key in _ALL_KEYS}
        if self.log is False:
            given.discard("log")
        for key in sorted(given - _USES[self.type]):
            uses = ", ".join(sorted(_USES[self.type]))
            raise FieldProblem(key, f"not used by type {self.type} (it takes {uses})")
        if self.type == "fixed" and "value" not in self.model_fields_set:
            raise FieldProblem("value", "required for type fixed")

    def _check_range(self) -> None:
        for key in ("low", "high"):
            if getattr(self, key) is None:
                raise FieldProblem(key, f"required for type {self.type}")
        if self.type == "int":
            for key in ("low", "high", "step"):
                value = getattr(self, key)
                if value is not None and not float(value).is_integer():
                    raise FieldProblem(key, f"must be a whole number for type int (got {value})")
        for key in ("low", "high", "step"):
            value = getattr(self, key)
            if value is not None and not math.isfinite(value):
                raise FieldProblem(key, f"must be a finite number (got {value})")
        if self.low > self.high:
            raise FieldProblem("low", f"must be <= high ({self.low} > {self.high})")
        if self.log and self.low <= 0:
            raise FieldProblem("low", f"must be > 0 when log is true (got {self.low})")
        if self.step is not None and self.step <= 0:
            raise FieldProblem("step", f"must be > 0 (got {self.step})")
        if self.log and self.step is not None and not (self.type == "int" and self.step == 1):
            raise FieldProblem(
                "step", "cannot be combined with log: true (Optuna samples a log scale without steps)"
            )

    # ---- queries used by the study manager and by validation --------------------------------------------------
    def possible_values(self) -> list[Any] | None:
        """Every value the parameter can take, when that is a short finite list (categorical, fixed); else None."""
        if self.type == "categorical":
            return list(self.choices or [])
        if self.type == "fixed":
            return [self.value]
        return None

    def extremes(self) -> list[Any]:
        """Values worth trying when checking the training arguments: both ends of a range, or every choice."""
        values = self.possible_values()
        if values is not None:
            return values
        low, high = (int(self.low), int(self.high)) if self.type == "int" else (self.low, self.high)
        return [low, high]

    def accepts(self, value: Any) -> bool:
        """Whether `value` lies in this parameter's distribution (used to check enqueued trials)."""
        if self.type in ("categorical", "fixed"):
            return any(
                value == option and type(value) is type(option) for option in self.possible_values() or []
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.type == "int" and not float(value).is_integer():
            return False
        if not self.low <= value <= self.high:
            return False
        if self.step is not None:
            steps = (value - self.low) / self.step
            return math.isclose(steps, round(steps), abs_tol=1e-8)
        return True

    def describe(self) -> str:
        if self.type in ("categorical", "fixed"):
            return f"one of {self.possible_values()}"
        step = f" in steps of {self.step}" if self.step is not None else ""
        return f"a{' whole' if self.type == 'int' else ''} number in [{self.low}, {self.high}]{step}"

    def to_distribution(self) -> Any:
        """The Optuna distribution of this parameter (fixed values have none: they are never sampled)."""
        from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

        if self.type == "float":
            return FloatDistribution(float(self.low), float(self.high), log=self.log, step=self.step)
        if self.type == "int":
            return IntDistribution(int(self.low), int(self.high), log=self.log, step=int(self.step or 1))
        if self.type == "categorical":
            return CategoricalDistribution(self.choices)
        return None

    def grid_values(self) -> list[Any] | None:
        """The values a grid sampler tries: choices, or a range with a step (None for a float range without one)."""
        values = self.possible_values()
        if values is not None:
            return values
        if self.type == "int":
            return list(range(int(self.low), int(self.high) + 1, int(self.step or 1)))
        if self.step is None:
            return None
        count = int(round((self.high - self.low) / self.step))
        return [round(self.low + i * self.step, 12) for i in range(count + 1)]
