"""`study.scheduler: {type: asha}`: asynchronous successive halving, in one of two modes.

    scheduler: {type: asha}                 # mode stop: rungs from each trial's first evaluation, each twice as
                                            # far; the share kept at a rung as it ranks what follows (keep: ranked)
    scheduler: {type: asha, mode: stop, min_resource: 4, reduction_factor: 3}   # the first rung at step 4 (of 36),
                                            # the top third goes on (keep defaults to 1 / reduction_factor)
    scheduler: {type: asha, keep: 0.5}      # rungs from the first evaluation, half kept at each
    scheduler: {type: asha, keep: 0.75}     # three quarters at each (round 7's default, with multi_fidelity: true)
    scheduler: {type: asha, startup_trials: 2}   # mode stop, no trial stopped before 2 have completed
    scheduler: {type: asha, mode: promotion}   # one pausing rung at the first evaluation past a ninth, judging
                                               # once 2 trials have finished
    scheduler: {type: asha, resource: steps, min_resource: 4, max_resource: 36, reduction_factor: 3}   # promotion
    scheduler: {type: asha, ..., max_rungs: 1}                 # only the lowest rung
    scheduler: {type: asha, ..., promote_underfilled: false}   # the paper's rule (no promotion below eta trials)
    scheduler: {type: asha, rank_gate: false}          # judge at the rung from the first trial
    scheduler: {type: asha, rank_gate: true}           # judge once 8 finished trials show the rung ranks them
    scheduler: {type: asha, rank_gate: {min_pairs: 5, min_correlation: 0.8}}

**mode stop** (the default): every evaluation is reported to a pruner (hpo.storage.stop_rungs) whose rungs are
fractions of each trial's length, the first at `min_resource / max_resource` (each trial's first evaluation without
min_resource), each next one `reduction_factor` times further (2 by default); at a rung, a trial outside the best
`keep` of the trials that reached it stops (successive halving, asynchronous: judged against those before it). `keep`
defaults to `ranked` on the bare default and to 1 / reduction_factor (successive halving's share) when min_resource or
reduction_factor is given. `ranked`: at a rung at fraction f of the length, the other trials' values at f and at 4f
(those that have both; pairs exist long before any trial completes) decide the share: a third kept where their
Spearman correlation is at least 0.8 (the rung ranks: cut as successive halving does), every trial where it is below
0.5 (the rung misleads: stop nothing there), two thirds between and until 8 such pairs exist (a third with 4-7
pairs that rank beyond doubt: hpo.storage.stop_rungs.RANKED_SURE; two thirds rather than three quarters since
docs/search-rounds.md's "Round 17", judged at the costs a real trial pays). Nothing pauses, so
nothing is resumed, and the study may run `--in-process`.
`startup_trials: n` stops no trial before n trials have completed (0 by default: ASHA's rule judges from the second
trial; a study that names no pruner gets 2, hpo.spec.study). The study's TPE is Optuna's (it learns from finished
trials and ranks stopped ones below them; `sampler: {multi_fidelity: true}` makes it learn from every rung value,
hpo.storage.rung_sampler). bench/search judged it at 400 seeds on 19 recorded problems beside seven other schedules
(docs/search-rounds.md, "Round 9"): the held-out rule, stated before the runs, picks it on all 19 (worst time to q95
1.24x the best peer's, against 1.28x for keep 3/4 with the multi-fidelity TPE, the default of round 7), with a better
final model than TPE's on average. Where early values mislead, it stops nothing at a rung; where they rank, it stops
the poor ones as successive halving does. It needs evaluations during training, as any pruner does.

**mode promotion**: a trial trains to min_resource * reduction_factor^k (global steps, or epochs with `resource:
epochs`), at most `max_rungs` of them, reports its objective there, saves a checkpoint and pauses;
`hpo.scheduling.promotion` decides which paused trials continue. Without `min_resource` the study gets one rung at its
first evaluation at or past a ninth of the length (1 / reduction_factor^2: the first multiple of `eval_steps` there
with `eval_strategy: steps`, that epoch with `resource: epochs`; without a cadence in the resource's unit, the ninth
itself), where the top third goes on, and the rung judges once two trials have run to the end (`rank_gate:
{min_pairs: 2, min_correlation: -1}`: until then a trial at the rung trains on); that was the default until the
held-out suite preferred stopping (it ranks behind stop mode there, docs/benchmarks.md). A section without `mode`
is a promotion one when it gives `min_resource`, `max_rungs`, `continue_in_place`, `promote_underfilled` or
`rank_gate` (files written for promotion keep it), or when the study does not evaluate during training (a promotion
rung evaluates where it pauses).

Both modes: `max_resource` is the trial's full length: it becomes `training.max_steps` (or `num_train_epochs`), so the
learning-rate schedule is laid out for it from the start (a promoted trial ends bitwise equal to one trained straight
through). It defaults to the training length the file gives, and `resource` defaults to that length's unit: epochs for
a study that trains by `num_train_epochs` without `max_steps`, else steps. A study has a scheduler or a pruner.

`rank_gate` (hpo.scheduling.rank_gate): the rung judges only once at least `min_pairs` completed trials have a
Spearman correlation of at least `min_correlation` between their value at the rung and their final score; until then a
trial at the rung trains on. `true` turns on the correlation gate (8 pairs, 0.7), `false` turns any gate off; it is
off when min_resource is given (rungs chosen by hand judge from the first trial) unless set.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, field_validator

from hpo.spec.base import Section
from hpo.spec.errors import FieldProblem

# The default promotion rung judges once this many trials have run to the end (and not before: a rung with nothing
# finished to compare against cut the first, often best, trials short on LoRA on MiniLM; bench/search,
# docs/benchmarks.md).
STARTUP_TRIALS = 2
# Stop-type rungs (`mode: stop`, the default): the first at each trial's first evaluation (fraction 0), each next one
# twice as far, the share kept at each set by how well the rung ranks what follows it (a third, two thirds or all);
# the held-out choice of bench/search (docs/search-rounds.md, "Round 9"; two thirds rather than three quarters since
# "Round 17").
STOP_FIRST_FRACTION = 0.0
STOP_REDUCTION_FACTOR = 2
RANKED = "ranked"  # `keep: ranked`: the share kept follows how well the rung ranks (hpo.storage.stop_rungs)
STOP_KEEP = RANKED
PROMOTION_REDUCTION_FACTOR = 3
# What only pausing and promoting has: any of them given (or min_resource, which files meant for promotion before
# stopping became the default) makes a section without `mode` a promotion one.
PROMOTION_FIELDS = ("min_resource", "max_rungs", "continue_in_place", "promote_underfilled", "rank_gate")
# What only stopping has: any of them given makes a section without `mode` a stop one.
STOP_FIELDS = ("startup_trials", "keep")


def rung_levels(
    min_resource: int, max_resource: int, reduction_factor: int, max_rungs: int | None = None
) -> list[int]:
    """The resource levels at which a trial pauses: min_resource * eta^k for every k with a level below max_resource,
    the lowest `max_rungs` of them when given."""
    levels, level = [], min_resource
    while level < max_resource and (max_rungs is None or len(levels) < max_rungs):
        levels.append(level)
        level *= reduction_factor
    return levels


class RankGateSpec(Section):
    enabled: bool = True  # `rank_gate: true` / `false` in a file set this alone
    min_pairs: int = Field(8, ge=2)
    min_correlation: float = Field(0.7, ge=-1.0, le=1.0)


class SchedulerSpec(Section):
    type: Literal["asha"] = "asha"
    # stop: trials are stopped at their rungs (successive halving); promotion: paused and continued (ASHA's paper).
    # None: stop, unless a promotion setting is given or the study does not evaluate during training (settle).
    mode: Literal["stop", "promotion"] | None = None
    resource: Literal["steps", "epochs"] = "steps"  # not given: the unit of the training length (settle)
    min_resource: int | None = Field(
        None, ge=1
    )  # None: one rung at the first evaluation past a ninth (settle)
    max_resource: int | None = Field(None, ge=1)
    reduction_factor: int | None = Field(None, ge=2)  # None: 2 stopping, 3 promoting (settle)
    # At most this many rungs, the lowest: min_resource, min_resource * reduction_factor, ... None: every level below
    # max_resource. With min_resource left out: 1.
    max_rungs: int | None = Field(None, ge=1)
    # A trial the rule would promote the moment it reaches its rung trains on without pausing. false: every promotion
    # is a pause and a resume (the paper's ASHA; what a promotion costs shows in `hpo status`).
    continue_in_place: bool = True
    # The best trial of a rung that fewer than reduction_factor trials reached goes on (as Optuna's pruners let it),
    # so the first trials reach the full budget early. false: the paper's rule, nothing promoted until a rung holds
    # reduction_factor trials (bench/search measured it slower to every target: docs/benchmarks.md).
    promote_underfilled: bool = True
    # None: on with the default rung, off with a given min_resource (settle decides `enabled`).
    rank_gate: RankGateSpec | None = None
    # Mode stop: no trial is stopped before this many trials have completed (Optuna's median pruner waits for 5).
    # None: 0, ASHA's rule from the second trial.
    startup_trials: int | None = Field(None, ge=0)
    # Mode stop: the share of a rung's trials that go on, or "ranked" (the share follows how well the rung ranks the
    # values further on, hpo.storage.stop_rungs). None: ranked on the bare default, 1 / reduction_factor when
    # min_resource or reduction_factor is given (successive halving's share).
    keep: float | Literal["ranked"] | None = None

    @field_validator("keep", mode="before")
    @classmethod
    def _keep_share(cls, value: Any) -> Any:
        """A share strictly between 0 and 1, or `ranked`; one message for either (not pydantic's one per type)."""
        if value is None or value == RANKED:
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"must be a share between 0 and 1, or {RANKED} (got {value!r})")
        if not 0 < value < 1:
            raise ValueError(f"must be more than 0 and less than 1, or {RANKED} (got {value})")
        return float(value)

    @field_validator("rank_gate", mode="before")
    @classmethod
    def _rank_gate_switch(cls, value: Any) -> Any:
        return {"enabled": value} if isinstance(value, bool) else value

    def training_length_key(self) -> str:
        return "max_steps" if self.resource == "steps" else "num_train_epochs"

    def settle(self, training: dict[str, Any], evaluates: bool = True) -> dict[str, Any]:
        """Check the scheduler against the training section; fill max_resource from it and it from max_resource,
        and the mode and its defaults. `evaluates`: whether every trial evaluates during training (stop-type rungs
        judge there). Returns the training section to use."""
        self._choose_mode(evaluates)
        self._follow_the_length_unit(training)
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
        if self.mode == "stop":
            if self.keep is None:
                by_hand = self.min_resource is not None or self.reduction_factor is not None
                self.keep = 1 / (self.reduction_factor or STOP_REDUCTION_FACTOR) if by_hand else STOP_KEEP
            self.reduction_factor = self.reduction_factor or STOP_REDUCTION_FACTOR
            self.startup_trials = self.startup_trials or 0
            self._check_below_the_length()
            return {**training, key: self.max_resource}
        self.reduction_factor = self.reduction_factor or PROMOTION_REDUCTION_FACTOR
        if self.min_resource is None:
            if self.max_resource < 2:
                raise FieldProblem(
                    "study.scheduler.max_resource",
                    f"is {self.max_resource} {self.resource}: too short to pause; count in steps (resource: steps)",
                )
            self.min_resource = self._default_rung(training, self.max_resource)
            self.max_rungs = self.max_rungs or 1
            if self.rank_gate is None:
                self.rank_gate = RankGateSpec(min_pairs=STARTUP_TRIALS, min_correlation=-1.0)
        if self.rank_gate is None:
            self.rank_gate = RankGateSpec(enabled=False)  # rungs chosen by hand judge from the first trial
        self._check_below_the_length()
        return {**training, key: self.max_resource}

    def _check_below_the_length(self) -> None:
        if (
            self.min_resource is not None
            and self.max_resource is not None
            and self.min_resource >= self.max_resource
        ):
            verb = "stops" if self.mode == "stop" else "pauses"
            raise FieldProblem(
                "study.scheduler.min_resource",
                f"must be below max_resource ({self.max_resource}), or no trial ever {verb}",
            )

    def _choose_mode(self, evaluates: bool) -> None:
        """`mode` not given: stop, the default bench/search chose on held-out problems, unless the section gives a
        setting only promotion has (a file written for the promotion rung keeps it) or trials do not evaluate during
        training (a stop-type rung judges at an evaluation; a promotion rung evaluates where it pauses). A setting
        only stopping has makes it stop, checked as a given `mode: stop` is."""
        promotion_only = [name for name in PROMOTION_FIELDS if name in self.model_fields_set]
        stop_only = [name for name in STOP_FIELDS if name in self.model_fields_set]
        if self.mode is None:
            promotes = not stop_only and (bool(promotion_only) or not evaluates)
            self.mode = "promotion" if promotes else "stop"
            if not stop_only:
                return
        if self.mode != "stop":
            if stop_only:
                raise FieldProblem(
                    f"study.scheduler.{stop_only[0]}",
                    "is a setting of mode stop (stopping trials at their rungs), but this scheduler pauses them; "
                    "set mode: stop, or remove it",
                )
            return
        if extra := [name for name in promotion_only if name != "min_resource"]:
            raise FieldProblem(
                f"study.scheduler.{extra[0]}",
                "is a setting of promotion (pausing and continuing trials), but mode is stop; set mode: promotion, "
                "or remove it",
            )
        if not evaluates:
            raise FieldProblem(
                "study.scheduler.mode",
                "stop judges trials at their evaluations, but evaluation can be off (training.eval_strategy is 'no' "
                "by default); set training.eval_strategy: epoch (or steps with eval_steps), or mode: promotion",
            )

    def first_fraction(self) -> float:
        """Stop-type rungs: where the first one sits, as a fraction of a trial's length (then reduction_factor
        times further each): min_resource / max_resource when given, else 0 (each trial's first evaluation)."""
        if self.min_resource is not None and self.max_resource:
            return self.min_resource / self.max_resource
        return STOP_FIRST_FRACTION

    def promotion_levels(self) -> list[int]:
        """Promotion-type rungs: the resource levels a trial pauses at (in `resource` units), once settled."""
        assert self.min_resource is not None and self.max_resource is not None  # settled
        assert self.reduction_factor is not None
        return rung_levels(self.min_resource, self.max_resource, self.reduction_factor, self.max_rungs)

    def _follow_the_length_unit(self, training: dict[str, Any]) -> None:
        """`resource` not given: count in the unit the study's length is given in. A study that trains by
        `num_train_epochs` (no `max_steps`) counts in epochs, so `scheduler: {type: asha}` works as written on it; its
        length in steps is known only once the data is loaded, and an epoch is where such a study evaluates."""
        if "resource" in self.model_fields_set or self.max_resource is not None:
            return
        steps = training.get("max_steps")
        if (steps is None or int(float(steps)) <= 0) and training.get("num_train_epochs") is not None:
            self.resource = "epochs"

    def _default_rung(self, training: dict[str, Any], length: int) -> int:
        """Where the default rung goes: the first evaluation at or past a ninth of the length (1 / reduction_factor^2):
        with `resource: epochs` that epoch, with `eval_strategy: steps` the first multiple of `eval_steps` (or of a
        fraction of the length) there. Without a cadence in the resource's unit (evaluation each epoch, counted in
        steps), or when the evaluation falls past the end, the ninth itself. bench/search chose it on held-out
        problems (docs/benchmarks.md): at the first evaluation, slow starters were cut before they showed anything."""
        assert self.reduction_factor is not None  # set by settle before
        floor = max(1, math.ceil(length / self.reduction_factor**2))
        if self.resource == "epochs" or str(training.get("eval_strategy", "no")) != "steps":
            return floor if floor < length else max(1, length - 1)
        every = float(training.get("eval_steps") or training.get("logging_steps") or 500)
        every = max(1, math.ceil(every * length) if every < 1 else int(every))
        first = math.ceil(floor / every) * every
        return first if first < length else floor
