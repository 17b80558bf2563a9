"""`study.sampler` and `study.pruner`: a closed set of Optuna samplers and pruners, with their options.

Options may be written inline or under `options:` (both mean the same):

    sampler: {type: tpe, seed: 0, n_startup_trials: 5, multivariate: true}
    sampler: {type: tpe, multi_fidelity: false}   # Optuna's TPE exactly, also under an ASHA scheduler
    pruner:  {type: hyperband, options: {min_resource: 1, reduction_factor: 3}}
    pruner:  {type: patient, patience: 2, wrapped: {type: median}}

Each option name is checked against the Optuna constructor's signature, and `build()` constructs the object, so a bad
option value is refused by `hpo validate` before any trial runs.
"""

from __future__ import annotations

import difflib
import inspect
import warnings
from typing import Any, Literal

from pydantic import ConfigDict, model_validator

from hpo.spec.base import Section
from hpo.spec.errors import FieldProblem

SAMPLERS = {
    "tpe": "TPESampler",
    "random": "RandomSampler",
    "grid": "GridSampler",
    "cmaes": "CmaEsSampler",
    "gp": "GPSampler",
    "nsgaii": "NSGAIISampler",
    "qmc": "QMCSampler",
}
PRUNERS = {
    "median": "MedianPruner",
    "percentile": "PercentilePruner",
    "successive_halving": "SuccessiveHalvingPruner",
    "hyperband": "HyperbandPruner",
    "wilcoxon": "WilcoxonPruner",
    "patient": "PatientPruner",
    "threshold": "ThresholdPruner",
    "none": "NopPruner",
}
# Constructor arguments that take Python objects or that hpo fills in itself: not settable from a YAML file.
NOT_FROM_YAML = {
    "search_space",
    "gamma",
    "weights",
    "constraints_func",
    "mutation",
    "crossover",
    "independent_sampler",
    "elite_population_selection_strategy",
    "child_generation_strategy",
    "after_trial_strategy",
    "source_trials",
    "wrapped_pruner",
}


def _options(model: Section, declared: dict[str, Any]) -> dict[str, Any]:
    inline = dict(model.model_extra or {})
    for key in inline.keys() & declared.keys():
        raise FieldProblem(key, "given both inline and under options:; keep one")
    return {**declared, **inline}


def _check_names(cls: type, options: dict[str, Any], kind: str) -> None:
    settable = [n for n in inspect.signature(cls).parameters if n not in NOT_FROM_YAML and n != "seed"]
    for name in options:
        if name not in settable:
            close = difflib.get_close_matches(name, settable, n=1)
            hint = (
                f"did you mean {close[0]}?"
                if close
                else f"{kind} takes: {', '.join(settable) or 'no options'}"
            )
            raise FieldProblem(name, f"unknown option of {cls.__name__} ({hint})")


class SamplerSpec(Section):
    model_config = ConfigDict(extra="allow", validate_default=True)

    type: Literal["tpe", "random", "grid", "cmaes", "gp", "nsgaii", "qmc"] = "tpe"
    seed: int | None = None
    options: dict[str, Any] = {}
    # TPE only: learn from every rung value, paused and running trials included (hpo.storage.rung_sampler, BOHB's
    # model on the highest budget with enough observations). None: on when the study has an ASHA scheduler, whose
    # paused trials Optuna's TPE never sees; off otherwise (Optuna's TPE as it is).
    multi_fidelity: bool | None = None

    @model_validator(mode="after")
    def _check(self) -> SamplerSpec:
        self.options = _options(self, self.options)
        self.__pydantic_extra__ = {}
        _check_names(self.optuna_class(), self.options, f"sampler {self.type}")
        if self.multi_fidelity and self.type != "tpe":
            raise FieldProblem("multi_fidelity", f"is for sampler type tpe, not {self.type}")
        return self

    def optuna_class(self) -> type:
        import optuna

        return getattr(optuna.samplers, SAMPLERS[self.type])

    def build(self, grid: dict[str, list[Any]] | None = None, cls: type | None = None) -> Any:
        """The Optuna sampler; `grid` (parameter -> values) is required for type grid. `cls`: a subclass of the
        type's Optuna class to build instead (the multi-fidelity TPE), with the same options."""
        kwargs = dict(self.options)
        if self.seed is not None:
            kwargs["seed"] = self.seed
        if self.type == "grid":
            kwargs["search_space"] = grid or {}
        try:
            return (cls or self.optuna_class())(**kwargs)
        except (TypeError, ValueError) as error:
            raise FieldProblem(
                "options", f"{self.optuna_class().__name__} refused the options: {error}"
            ) from error


class PrunerSpec(Section):
    model_config = ConfigDict(extra="allow", validate_default=True)

    type: Literal[
        "median", "percentile", "successive_halving", "hyperband", "wilcoxon", "patient", "threshold", "none"
    ] = "median"
    options: dict[str, Any] = {}
    wrapped: PrunerSpec | None = None  # the pruner a `patient` pruner waits on

    @model_validator(mode="after")
    def _check(self) -> PrunerSpec:
        self.options = _options(self, self.options)
        self.__pydantic_extra__ = {}
        _check_names(self.optuna_class(), self.options, f"pruner {self.type}")
        if self.wrapped is not None and self.type != "patient":
            raise FieldProblem("wrapped", "only a patient pruner wraps another pruner")
        with (
            warnings.catch_warnings()
        ):  # a check, not a use: Optuna's "experimental" notice can wait for the study
            warnings.simplefilter("ignore")
            self.build()  # constructing it checks option values (e.g. percentile in [0, 100])
        return self

    def optuna_class(self) -> type:
        import optuna

        return getattr(optuna.pruners, PRUNERS[self.type])

    @property
    def enabled(self) -> bool:
        return self.type != "none"

    def build(self) -> Any:
        kwargs = dict(self.options)
        if self.type == "patient":
            kwargs["wrapped_pruner"] = self.wrapped.build() if self.wrapped is not None else None
            if "patience" not in kwargs:
                raise FieldProblem("patience", "required for a patient pruner, e.g. patience: 3")
        try:
            return self.optuna_class()(**kwargs)
        except (TypeError, ValueError) as error:
            problem = str(error)
            field = next((name for name in kwargs if name in problem), "options")
            raise FieldProblem(field, f"{self.optuna_class().__name__} refused it: {problem}") from error
