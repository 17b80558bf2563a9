"""`study.scheduler: {type: pbt, ...}`: population-based training (Jaderberg et al. 2017).

    scheduler:
      type: pbt
      population: 8                 # members (trials); members beyond the free slots queue
      perturbation_interval: 50     # steps between two exploit/explore decisions
      max_resource: 400             # steps each member trains (its learning-rate schedule is laid out for these)
      quantile_fraction: 0.25       # the bottom quarter copies a member of the top quarter
      resample_probability: 0.25    # a perturbed value is drawn anew from the search space this often
      mutations:
        learning_rate: {factors: [0.8, 1.2]}
        weight_decay: {resample: true}

Only hyperparameters that can change in the middle of a run may mutate: the optimizer's param-group values
(`MUTABLE_TRAINING`) and the model parameters the task names under `task.mutable` (e.g. dropout, with a function that
sets it on a built model). Anything else (a hidden size, a batch size, a schedule type) would need a new model or a new
optimizer, which an exploit cannot carry over, so it is refused before the study starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from hpo.spec.base import Section
from hpo.spec.errors import FieldProblem
from hpo.spec.search_space import ParamSpec

if TYPE_CHECKING:
    from hpo.spec.study import StudySpec

# TrainingArguments fields that live in the optimizer's param groups, so they can change between two steps.
MUTABLE_TRAINING = ("learning_rate", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon")


class MutationSpec(Section):
    factors: list[float] | None = None
    resample: bool = False

    @model_validator(mode="after")
    def _one_kind(self) -> MutationSpec:
        if self.factors is None and not self.resample:
            raise FieldProblem(None, "give factors: [0.8, 1.2] (perturb) or resample: true (draw anew)")
        if self.factors is not None and self.resample:
            raise FieldProblem(None, "give factors or resample: true, not both")
        if self.factors is not None:
            if not self.factors:
                raise FieldProblem("factors", "list at least one factor, e.g. [0.8, 1.2]")
            if any(not f > 0 for f in self.factors):
                raise FieldProblem("factors", f"every factor must be > 0 (got {self.factors})")
        return self


class PbtSchedulerSpec(Section):
    type: Literal["pbt"]
    population: int = Field(ge=2)
    perturbation_interval: int = Field(ge=1)
    max_resource: int = Field(ge=1)
    quantile_fraction: float = Field(0.25, gt=0, le=0.5)
    resample_probability: float = Field(0.25, ge=0, le=1)
    mutations: dict[str, MutationSpec]

    @model_validator(mode="after")
    def _check(self) -> PbtSchedulerSpec:
        if not self.mutations:
            raise FieldProblem(
                "mutations", "name at least one hyperparameter, e.g. learning_rate: {factors: [0.8, 1.2]}"
            )
        if (
            self.max_resource % self.perturbation_interval != 0
            or self.max_resource < self.perturbation_interval
        ):
            raise FieldProblem(
                "max_resource",
                f"must be a multiple of perturbation_interval ({self.perturbation_interval}), so every member is "
                f"scored at its last step as at every interval (got {self.max_resource})",
            )
        return self

    def settle(self, training: dict[str, Any]) -> dict[str, Any]:
        """The training section a member runs with: max_resource steps, evaluated and saved at every interval, every
        checkpoint kept (another member may copy it). Conflicting settings are refused, naming the field."""
        interval = self.perturbation_interval
        given = training.get("max_steps")
        if given is not None and int(given) > 0 and int(given) != self.max_resource:
            raise FieldProblem(
                "training.max_steps",
                f"is {given} but study.scheduler.max_resource is {self.max_resource}; remove training.max_steps "
                "(max_resource sets how long each member trains)",
            )
        settled = {**training, "max_steps": self.max_resource}
        for kind in ("eval", "save"):
            strategy, steps = training.get(f"{kind}_strategy", "no"), training.get(f"{kind}_steps")
            if strategy in ("no", None) or steps is None:
                settled.update({f"{kind}_strategy": "steps", f"{kind}_steps": interval})
            elif strategy != "steps" or float(steps) < 1 or interval % int(steps) != 0:
                raise FieldProblem(
                    f"training.{kind}_steps",
                    f"a PBT member is scored and saved every perturbation_interval ({interval}) steps; remove "
                    f"training.{kind}_strategy/{kind}_steps, or make {kind}_steps divide {interval}",
                )
        if training.get("save_total_limit") is not None:
            raise FieldProblem(
                "training.save_total_limit",
                "PBT keeps the checkpoints other members may copy (and removes them once no member can); remove it",
            )
        return settled

    def intervals(self) -> list[int]:
        """The steps at which a member stops, is scored and may exploit; the last is max_resource."""
        steps = list(range(self.perturbation_interval, self.max_resource, self.perturbation_interval))
        return [*steps, self.max_resource]


def check_mutations(
    scheduler: PbtSchedulerSpec, space: dict[str, ParamSpec], task_mutable: list[str]
) -> None:
    """Refuse a mutation of a hyperparameter that cannot change mid-run, or one the search space does not define."""
    listing = (
        f"hyperparameters that can change mid-run: {', '.join(MUTABLE_TRAINING)}"
        + (f", and the task's {', '.join(task_mutable)}" if task_mutable else "")
        + " (a task adds model parameters under task.mutable, e.g. dropout: my_task:set_dropout)"
    )
    for name, mutation in scheduler.mutations.items():
        where = f"study.scheduler.mutations.{name}"
        param = space.get(name)
        if param is None:
            raise FieldProblem(
                where, f"not a parameter of search_space; a mutation needs its range there ({listing})"
            )
        mutable = name in task_mutable if param.target == "model" else name in MUTABLE_TRAINING
        if not mutable:
            raise FieldProblem(where, f"{name} cannot change in the middle of a run; {listing}")
        if param.type == "fixed":
            raise FieldProblem(where, f"{name} is fixed in search_space; give it a range to mutate within")
        if mutation.factors is not None and param.type not in ("float", "int"):
            raise FieldProblem(
                where, f"factors need a numeric range, {name} is {param.type}; use resample: true"
            )
        if name == "weight_decay" and param.type in ("float", "int") and param.low <= 0:
            raise FieldProblem(
                f"search_space.{name}.low",
                "must be > 0 for PBT: a weight decay of 0 builds a single parameter group (no decay split), so "
                "members could not share optimizer state",
            )
    for name in space:
        param = space[name]
        if param.when and name in scheduler.mutations:
            raise FieldProblem(
                f"study.scheduler.mutations.{name}",
                "a conditional parameter (when:) cannot mutate; remove when:",
            )


def check_pbt(spec: StudySpec) -> None:
    """What a PBT study needs beyond what every scheduler needs (one objective, no pruner, its settled length): the
    member's value is its last score, the study's size is the population, and only mid-run values mutate."""
    scheduler = spec.study.scheduler
    assert isinstance(scheduler, PbtSchedulerSpec)
    for name in ("max_steps", "num_train_epochs"):
        if name in spec.search_space:
            raise FieldProblem(
                f"search_space.{name}", "a PBT member trains study.scheduler.max_resource steps; remove it"
            )
    if spec.study.objective == "best" and "objective" in spec.study.model_fields_set:
        raise FieldProblem(
            "study.objective",
            "a PBT member's value is its score at max_resource (its best evaluation may be another member's, from "
            "before it copied); remove objective or set it to last",
        )
    spec.study.objective = "last"
    if spec.study.n_trials is not None and spec.study.n_trials != scheduler.population:
        raise FieldProblem(
            "study.n_trials",
            f"is {spec.study.n_trials} but a PBT study trains its population ({scheduler.population}); remove "
            "n_trials (population sets it)",
        )
    spec.study.n_trials = scheduler.population
    check_mutations(scheduler, spec.search_space, sorted(spec.task.mutable))
