"""The methods compared: a searcher (which configuration next: Optuna's random or the study's TPE) with a scheduler
(none, an Optuna pruner that stops trials, or hpo's promotion ASHA that pauses and resumes them).

The sampler and pruner objects are built by hpo's own code from the same sections a study file holds
(`SamplerSpec`, `PrunerSpec`, `build_sampler`'s per-worker seed offset), so a method here is what `hpo run` would run
with that study file."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import yaml

from bench.search.adaptive_rungs import AdaptiveRungsPruner
from bench.search.early_ranks import EarlyRanksPruner, EarlyRanksSampler
from bench.search.keep_rungs import KeepRungsPruner
from bench.search.problems import Problem
from bench.search.random_share import RandomShareSampler
from bench.search.ranked_keep import RankedKeepPruner
from hpo.scheduling.rank_gate import RankGate
from hpo.spec import StudySpec, parse_study_spec
from hpo.spec.optuna_parts import PrunerSpec, SamplerSpec
from hpo.spec.scheduler import STARTUP_TRIALS
from hpo.storage.study_db import build_pruner, build_sampler, seed_offset


@dataclass(frozen=True)
class Method:
    name: str
    sampler: str  # "random", or "study": the study file's sampler section (TPE for digits)
    pruner: dict[str, Any] | None = None  # a study file's `pruner:` section (stop-type)
    asha: bool = False  # hpo's promotion ASHA at the problem's levels (pause and resume)
    in_place: bool = True  # ASHA's continue_in_place (hpo's default)
    underfilled: bool = False  # ASHA's promote_underfilled: a rung's best goes on below eta trials
    # TPE learns from every rung value, paused trials included (RungTPESampler); None: as hpo chooses for the study
    # file (hpo.storage.study_db.multi_fidelity: under promotion-type ASHA only).
    multi_fidelity: bool | None = False
    levels: tuple[int, ...] | None = (
        None  # ASHA's pause points in global steps; None: the problem's asha_levels
    )
    gate: RankGate | None = None  # ASHA's rank gate: a rung judges once its values rank the final scores
    # Hyperband-style brackets: each its own rung levels; trial n is in bracket n mod len (a hedge against one rung
    # placement, as Hyperband hedges successive halving's). Empty: one bracket, `levels`.
    brackets: tuple[tuple[int, ...], ...] = ()
    # A study file's `scheduler:` section that stops trials (ASHA in mode stop): its pruner is built by hpo from the
    # problem's study file with this section, as `hpo run` builds it (hpo.storage.study_db.build_pruner).
    scheduler: dict[str, Any] | None = None
    # The study file with neither a pruner nor a scheduler: what hpo chooses for it (hpo.spec.study), built by hpo.
    hpo_chooses: bool = False
    # Stop-type rungs whose first rung moves to where the completed trials' values rank (adaptive_rungs.py):
    # the pruner's keyword arguments.
    adaptive: dict[str, Any] | None = None
    # BOHB's hedge: this share of the trials drawn at random, the rest by the study's sampler (random_share.py).
    random_share: float = 0.0
    # Ray Tune's recipe once the early values rank (early_ranks.py): {"pairs", "min_correlation", "random"}.
    early_ranks: dict[str, Any] | None = None
    # Stop-type rungs from the first evaluation keeping a share apart from their spacing (keep_rungs.py):
    # {"keep", "spacing"}.
    keep_rungs: dict[str, Any] | None = None
    # Rungs from the first evaluation whose share kept follows how well the rung ranks the values further on
    # (ranked_keep.py): the pruner's keyword arguments.
    ranked_keep: dict[str, Any] | None = None

    @property
    def stops(self) -> bool:
        """Whether each evaluation is reported to a pruner that may stop the trial (hpo.trial.pruning)."""
        return (
            self.pruner is not None
            or self.scheduler is not None
            or self.hpo_chooses
            or self.adaptive is not None
            or self.early_ranks is not None
            or self.keep_rungs is not None
            or self.ranked_keep is not None
        )

    @property
    def simulated_only(self) -> bool:
        """Whether the method's pruner or sampler is bench/search's own (rounds 4-8's candidates), which no study
        file section builds: it runs in the simulator, not under `hpo run` (real.py, crosscheck.py)."""
        return (
            self.adaptive is not None
            or self.early_ranks is not None
            or self.keep_rungs is not None
            or self.ranked_keep is not None
            or self.random_share > 0
        )

    @property
    def early_rule(self) -> dict[str, Any]:
        """early_ranks.py's rule (pairs, min_correlation), without the method's choice of sampler."""
        return {k: v for k, v in (self.early_ranks or {}).items() if k != "random"}

    @property
    def sampler_choices(self) -> dict[str, Any]:
        """What the method sets in the study file's sampler section beside the seed."""
        return {} if self.multi_fidelity is None else {"multi_fidelity": self.multi_fidelity}

    def sampler_for(self, spec: StudySpec, seed: int, worker: int) -> optuna.samplers.BaseSampler:
        """Worker `worker`'s sampler in a run seeded `seed`: hpo seeds each worker apart (`seed_offset`)."""
        section = (
            SamplerSpec(type="random", seed=seed)
            if self.sampler == "random"
            else spec.study.sampler.model_copy(update={"seed": seed, **self.sampler_choices})
        )
        seeded = spec.model_copy(update={"study": spec.study.model_copy(update={"sampler": section})})
        sampler = build_sampler(seeded, seed_offset=seed_offset(worker, 0))
        if self.early_ranks is not None and self.early_ranks.get("random", True):
            return EarlyRanksSampler(sampler, seed + seed_offset(worker, 0), **self.early_rule)
        return RandomShareSampler(sampler, self.random_share, seed) if self.random_share else sampler

    def pruner_object(self, spec: StudySpec) -> optuna.pruners.BasePruner:
        if self.adaptive is not None:
            return AdaptiveRungsPruner(**self.adaptive)
        if self.early_ranks is not None:
            return EarlyRanksPruner(**self.early_rule)
        if self.keep_rungs is not None:
            return KeepRungsPruner(**self.keep_rungs)
        if self.ranked_keep is not None:
            return RankedKeepPruner(**self.ranked_keep)
        if self.hpo_chooses:
            return build_pruner(with_scheduler(spec, None))
        if self.scheduler is not None:
            return build_pruner(with_scheduler(spec, self.scheduler))
        return PrunerSpec(**self.pruner).build() if self.pruner else optuna.pruners.NopPruner()


def with_scheduler(spec: StudySpec, section: dict[str, Any] | None) -> StudySpec:
    """The study file behind `spec` with `section` as its scheduler (with the length the file's own scheduler
    gives, if any) and no pruner, validated as hpo validates it. None: neither, so hpo chooses."""
    assert spec.source is not None, "a problem's spec is loaded from its study file"
    data = yaml.safe_load(Path(spec.source).read_text())
    given = data["study"].get("scheduler") or {}
    length = {k: v for k, v in given.items() if k in ("resource", "max_resource")}
    data["study"] = {k: v for k, v in data["study"].items() if k not in ("pruner", "scheduler")}
    if section is not None:
        data["study"]["scheduler"] = {**length, **section}
    return parse_study_spec(data, source=spec.source)


def default_levels(problem: Problem) -> tuple[int, ...]:
    """The rung of `scheduler: {type: asha}` without min_resource: ceil(max_resource / eta) (hpo.spec.scheduler),
    moved up to the next recorded evaluation (a real run evaluates at the rung itself, the recording only every
    eval_every steps): digits 300 -> 315 steps, the CNN 150 -> 180, MiniLM 16 -> 18."""
    third = math.ceil(problem.steps / problem.eta)
    return (math.ceil(third / problem.eval_every) * problem.eval_every,)


def first_evaluation(problem: Problem) -> tuple[int, ...]:
    """The rung of `scheduler: {type: asha}` without min_resource since it was measured here: one rung at the first
    evaluation (hpo.spec.scheduler), the recording's first evaluated step: digits 45 of 900 steps (its first epoch),
    the CNN 45 of 450, MiniLM 6 of 48."""
    return (problem.eval_every,)


def past_a_ninth(problem: Problem) -> tuple[int, ...]:
    """The rung of `scheduler: {type: asha}` without min_resource since issue 36 (hpo.spec.scheduler): one rung at
    the first evaluation at or past a ninth of the length: digits 135 of 900 steps, the CNN 90 of 450, MiniLM 6 of
    48 (bench/search/candidates.py's "1 rung at 1/9")."""
    ninth = math.ceil(problem.steps / problem.eta**2)
    return (
        min(problem.steps - problem.eval_every, math.ceil(ninth / problem.eval_every) * problem.eval_every),
    )


def methods_for(problem: Problem) -> list[Method]:
    low, eta = problem.pruner_min_steps, problem.eta
    sh = {"type": "successive_halving", "min_resource": low, "reduction_factor": eta}
    hyperband = {
        "type": "hyperband",
        "min_resource": low,
        "max_resource": problem.steps,
        "reduction_factor": eta,
    }
    return [
        # the peers: Optuna's samplers, alone or with its stop-type pruners
        Method("random", "random"),
        Method("tpe", "study"),
        Method("tpe+sh", "study", sh),
        Method("tpe+hyperband", "study", hyperband),
        # Optuna's median pruner at its defaults: what hpo gave a study file that names no pruner and no scheduler
        # until issue 36 (it now gets NO_PRUNER_NAMED, below), and the pruner of Optuna's own tutorials
        Method("tpe+median", "study", {"type": "median"}),
        # the multi-fidelity TPE serves stop-type studies too
        Method("mftpe+sh", "study", sh, multi_fidelity=True),
        Method("mftpe+hyperband", "study", hyperband, multi_fidelity=True),
        # promotion ASHA: the paper's rule with Optuna's TPE (hpo's default until issue 23), then each change alone
        Method("random+asha", "random", asha=True),
        Method("tpe+asha", "study", asha=True),
        Method("tpe+asha-underfilled", "study", asha=True, underfilled=True),
        Method("mftpe+asha", "study", asha=True, multi_fidelity=True),
        Method("mftpe+asha-underfilled", "study", asha=True, underfilled=True, multi_fidelity=True),
        # one rung at a third of the length (min_resource left out), with Optuna's TPE, then with the multi-fidelity one
        Method("tpe+asha-one-rung", "study", asha=True, underfilled=True, levels=default_levels(problem)),
        Method(
            "mftpe+asha-one-rung",
            "study",
            asha=True,
            underfilled=True,
            multi_fidelity=True,
            levels=default_levels(problem),
        ),
        # the same rung behind the rank gate (hpo's default before the first-evaluation rung), with either TPE
        Method(
            "tpe+asha-gated",
            "study",
            asha=True,
            underfilled=True,
            levels=default_levels(problem),
            gate=RankGate(),
        ),
        Method(
            "mftpe+asha-gated",
            "study",
            asha=True,
            underfilled=True,
            multi_fidelity=True,
            levels=default_levels(problem),
            gate=RankGate(),
        ),
        # hpo's default: one rung at the first evaluation, judging once two trials have run to the end
        Method(
            "tpe+asha-first-eval",
            "study",
            asha=True,
            underfilled=True,
            levels=first_evaluation(problem),
            gate=RankGate(STARTUP_TRIALS, -1.0),
        ),
        Method(  # hpo's default before issue 36 (the rung at the first evaluation, with the multi-fidelity TPE)
            "mftpe+asha-first-eval",
            "study",
            asha=True,
            underfilled=True,
            multi_fidelity=True,
            levels=first_evaluation(problem),
            gate=RankGate(STARTUP_TRIALS, -1.0),
        ),
        Method(  # one rung at the first evaluation past a ninth of the length, judging once two trials have finished
            "mftpe+asha-ninth",
            "study",
            asha=True,
            underfilled=True,
            multi_fidelity=True,
            levels=past_a_ninth(problem),
            gate=RankGate(STARTUP_TRIALS, -1.0),
        ),
        Method(  # the same rung judging from the first trial
            "mftpe+asha-first-eval-ungated",
            "study",
            asha=True,
            underfilled=True,
            multi_fidelity=True,
            levels=first_evaluation(problem),
        ),
        # hpo's default since round 9: stop-type rungs from the first evaluation, x2, the share kept as the rung
        # ranks, Optuna's TPE
        shipped(problem),
        no_pruner_named(),
    ]


# What `scheduler: {type: asha}` does (hpo.spec.scheduler: mode stop, round 9's held-out pick at 400 seeds "ranked
# keep 1/3 | 3/4 | all plain TPE", bench/search/candidates.py), and what a study that names no pruner gets when it
# evaluates during training. Runs stored before round 9 (2026-12-02, after round 8's report) hold under this name
# round 7's pick "gentle rungs from 1st eval (keep 3/4 x2)" (the same runs seed for seed); runs stored before
# round 7 the schedule before it,
# rounds 1-3's pick "stop-type rungs from 1/9 (eta 2)" (the same runs seed for seed); before that one promotion rung
# past a ninth ("mftpe+asha-ninth"); before that the same rung at the first evaluation ("mftpe+asha-first-eval");
# before that one rung at a third behind the rank gate.
SHIPPED = "hpo: asha as written"
HPO_METHOD = SHIPPED  # the row run.py and real.py judge against the best peer
# A study file that names no pruner: the same rungs, no trial stopped before two have completed (hpo.spec.study).
NO_PRUNER_NAMED = "hpo: no pruner named"


def shipped(problem: Problem) -> Method:
    """`scheduler: {type: asha}` on the problem's study file, its pruner and sampler built by hpo itself (Optuna's
    TPE under stop-type rungs since round 9). Its runs equal the candidate it was chosen as, seed for seed
    (tests/bench_search)."""
    del problem  # laid out by hpo from the study file, as `hpo run` lays it out
    return Method(SHIPPED, "study", scheduler={"type": "asha"}, multi_fidelity=None)


def no_pruner_named() -> Method:
    """The problem's study file without its pruner or scheduler: what hpo chooses (the stop-type rungs with a
    start-up of two completed trials, as `hpo run` builds them, and the sampler that comes with them)."""
    return Method(NO_PRUNER_NAMED, "study", hpo_chooses=True, multi_fidelity=None)


PEERS = ("random", "tpe", "tpe+sh", "tpe+hyperband")  # what a user would otherwise run: Optuna as it comes
