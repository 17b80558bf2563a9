"""`study.scheduler`: a scheduler that pauses trials at rungs and continues the promising ones (promotion-type ASHA).

    scheduler: {type: asha}                 # one rung, at a third of the training length (the measured default)
    scheduler: {type: asha, resource: steps, min_resource: 4, max_resource: 36, reduction_factor: 3}
    scheduler: {type: asha, ..., promote_underfilled: false}   # the paper's rule (no promotion below eta trials)
    scheduler: {type: asha, rank_gate: false}          # judge at the rung from the first trial
    scheduler: {type: asha, rank_gate: {min_pairs: 5, min_correlation: 0.8}}

A trial trains to min_resource * reduction_factor^k (global steps, or epochs with `resource: epochs`), reports its
objective there, saves a checkpoint and pauses; `hpo.scheduling.promotion` decides which paused trials continue.
`max_resource` is the trial's full length: it becomes `training.max_steps` (or `num_train_epochs`), so the learning-rate
schedule is laid out for it from the start and a promoted trial ends bitwise equal to one trained straight through.
It defaults to the training length the file gives. Optuna pruners stop trials instead; a study has one or the other.

`min_resource` defaults to max_resource / reduction_factor, rounded up: one rung, where the top third goes on. The
paper's min_resource of 1 (rungs at 1, 3, 9 epochs of 20) screens many configurations on their first epoch; on every
problem bench/search records (an MLP and a CNN on digits, LoRA on MiniLM: 30-trial budgets, 100 seeds) that reached
the targets later than one rung at a third, and on digits it never reached the 95th percentile on most seeds, even
with four times the budget (docs/benchmarks.md, "Which search finds a good model soonest").

`rank_gate` (hpo.scheduling.rank_gate): the rung judges only once the study has seen its values rank the final
scores: at least `min_pairs` completed trials whose value at the rung and final score have a Spearman correlation of at
least `min_correlation` (8 and 0.7); until then a trial at the rung trains on. It is on by default with the default
rung (min_resource left out), and off when min_resource is given (rungs chosen by hand judge from the first trial)
unless set; `true` turns it on with its defaults, `false` off.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, field_validator

from hpo.spec.base import Section
from hpo.spec.errors import FieldProblem


class RankGateSpec(Section):
    enabled: bool = True  # `rank_gate: true` / `false` in a file set this alone
    min_pairs: int = Field(8, ge=2)
    min_correlation: float = Field(0.7, ge=-1.0, le=1.0)


class SchedulerSpec(Section):
    type: Literal["asha"] = "asha"
    resource: Literal["steps", "epochs"] = "steps"
    min_resource: int | None = Field(None, ge=1)  # None: ceil(max_resource / reduction_factor), one rung
    max_resource: int | None = Field(None, ge=1)
    reduction_factor: int = Field(3, ge=2)
    # A trial the rule would promote the moment it reaches its rung trains on without pausing. false: every promotion
    # is a pause and a resume (the paper's ASHA; what a promotion costs shows in `hpo status`).
    continue_in_place: bool = True
    # The best trial of a rung that fewer than reduction_factor trials reached goes on (as Optuna's pruners let it),
    # so the first trials reach the full budget early. false: the paper's rule, nothing promoted until a rung holds
    # reduction_factor trials (bench/search measured it slower to every target: docs/benchmarks.md).
    promote_underfilled: bool = True
    # None: on with the default rung, off with a given min_resource (settle decides `enabled`).
    rank_gate: RankGateSpec | None = None

    @field_validator("rank_gate", mode="before")
    @classmethod
    def _rank_gate_switch(cls, value: Any) -> Any:
        return {"enabled": value} if isinstance(value, bool) else value

    def training_length_key(self) -> str:
        return "max_steps" if self.resource == "steps" else "num_train_epochs"

    def settle(self, training: dict[str, Any]) -> dict[str, Any]:
        """Check the scheduler against the training section; fill max_resource from it and it from max_resource.
        Returns the training section to use."""
        key = self.training_length_key()
        given = training.get(key)
        if self.resource == "epochs" and int(training.get("max_steps", -1) or -1) > 0:
            raise FieldProblem(
                "study.scheduler.resource",
                "is epochs but training.max_steps is set (it would cut the epochs short); remove training.max_steps",
            )
        if self.max_resource is None:
            if given is None or float(given) <= 0 or float(given) != int(float(given)):
                raise FieldProblem(
                    "study.scheduler.max_resource",
                    f"is not given and training.{key} gives no whole length; set max_resource (a trial's full length)",
                )
            self.max_resource = int(float(given))
        elif given is not None and float(given) != self.max_resource:
            raise FieldProblem(
                "study.scheduler.max_resource",
                f"is {self.max_resource} but training.{key} is {given}; give the length once (max_resource sets it)",
            )
        if self.rank_gate is None:
            self.rank_gate = RankGateSpec(enabled=self.min_resource is None)
        if self.min_resource is None:
            if self.max_resource < 2:
                raise FieldProblem(
                    "study.scheduler.max_resource",
                    f"is {self.max_resource} {self.resource}: too short to pause; count in steps (resource: steps)",
                )
            self.min_resource = math.ceil(self.max_resource / self.reduction_factor)
        if self.min_resource >= self.max_resource:
            raise FieldProblem(
                "study.scheduler.min_resource",
                f"must be below max_resource ({self.max_resource}), or no trial ever pauses",
            )
        return {**training, key: self.max_resource}
