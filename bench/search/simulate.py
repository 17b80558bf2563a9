"""One method on one seed against a simulated clock: N workers, event by event, each configuration's recorded curve.

    outcome = simulate(recording, method, seed=3)          # hpo run with a --timeout of the problem's budget
    outcome = simulate(recording, method, seed=3, n_trials=30)   # or the study's n_trials (ends when all is done)

The events are the ends of evaluations, in a heap ordered by (time, sequence). At each one the running trial's
recorded value at that step is reported and the method decides, with the decision code `hpo run` uses:
- stop-type (no pruner, or Optuna's successive halving / Hyperband): `trial.report(value, step)` and
  `trial.should_prune()` on a real Optuna trial, from whatever the other trials have reported by that simulated
  moment; a pruned trial is told PRUNED and never runs again, a trial at the last step is told COMPLETE with its best
  (or last) evaluation, as `objective:` says;
- promotion ASHA: at a rung, the value goes into the trial's rung table and hpo's rule (`hpo.scheduling.asha`:
  `next_promotion`, and `hopeless` when n_trials bounds the study) decides, as `hpo.scheduling.promotion` does on the
  database: train on in place when the rule would promote this trial this very moment, else pause. A free worker
  takes the rule's promotion (resumed, paying `resume_s`), else a new configuration. A trial is paused, resumed and
  ended in the storage with hpo's own functions (`hpo.storage.pause`: a paused trial is WAITING), and new trials are
  taken as hpo takes them (`ask_queued`, `ask_new`), so a sampler sees of paused trials what it sees in a run;
  `promote_underfilled` and the multi-fidelity TPE are the method's (`Method.underfilled`, `.multi_fidelity`).
A worker that frees starts the next piece of work at once: a new configuration costs `start_s` plus its recorded
set-up; a pause costs `pause_s` before the worker is free; a resume costs `resume_s` (which includes set-up). A
stop-type method's report costs `report_s` (0 unless given: the storage write and the pruner's call), a checkpoint at
a trial's new best `save_s` whatever the method (0 unless given), and only
`start_inside_s` of the start falls between a trial's claim and its first report when given (the rest before the
claim), so that the start a simulated trial writes for round 14/15's rule is what a real trial writes.
Samplers ask on one in-memory storage, one Optuna study object per worker, each seeded apart as hpo's workers are, so
Hyperband's brackets (named by study and trial number) and TPE's draws are those of a real run with these seeds.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from bench.search.methods import Method
from bench.search.recording import Recording
from hpo.scheduling.asha import RungTrial, hopeless, next_promotion
from hpo.spec import StudySpec, load_study_spec
from hpo.storage import pause
from hpo.storage.stop_rungs import EVALUATION_ATTR, FIRST_REPORT_ATTR, LENGTH_ATTR
from hpo.storage.study_db import ask_new, ask_queued, trial_id
from hpo.trial.space import sample_params


@dataclass(frozen=True)
class Costs:
    start_s: float  # beyond the recorded set-up: claim, fork, recording the outcome
    pause_s: float  # save and exit at a pause
    resume_s: float  # claim, fork, data, model, restore, up to the first step
    # Each report of a method that stops trials: the storage write and the pruner's call, inside the interval a real
    # trial measures (bench/search/trial_costs.py: 0.008-0.011 s here). 0: none charged.
    report_s: float = 0.0
    # Each checkpoint `save_strategy: best` writes (at an evaluation that improves the trial's best), any method: the
    # recordings were made without checkpoints (record.py). 0: none charged.
    save_s: float = 0.0
    # The part of start_s between the trial's claim and its first step, which a real trial's start measure sees
    # (seconds_to_first_report); the rest is spent before the claim (the outcome, the next ask). None: all of it.
    start_inside_s: float | None = None

    @classmethod
    def of(cls, recording: Recording) -> Costs:
        p = recording.problem
        return cls(p.start_s, p.pause_s, p.resume_s, p.report_s, p.save_s, p.start_inside_s)

    @property
    def start_outside_s(self) -> float:
        return 0.0 if self.start_inside_s is None else max(0.0, self.start_s - self.start_inside_s)


@dataclass
class SimTrial:
    number: int
    trial: optuna.Trial
    config: int  # the recorded configuration it replays
    done: int = 0  # evaluations passed; the next one is at steps[done]
    best: float | None = None
    last: float | None = None
    resumes: int = 0
    state: str = "running"  # running, paused, complete, pruned
    rung: RungTrial | None = None  # ASHA only
    evaluated_at: list[float] = field(default_factory=list)
    ended_at: float | None = None  # told COMPLETE or PRUNED
    started_at: float = 0.0  # claimed by a worker (before the start cost and the set-up)
    score: float | None = None  # the value told with COMPLETE


@dataclass
class Outcome:
    trace: list[tuple[float, float]] = field(
        default_factory=list
    )  # (time, value) of every evaluation, in order
    busy_s: float = 0.0  # worker-seconds spent (set-up, training, evaluation, pauses, resumes)
    end_s: float = 0.0  # when the run ended: the budget, or when the last worker had nothing left
    started: list[int] = field(default_factory=list)  # recorded configuration of each trial, in start order
    trials: list[SimTrial] = field(default_factory=list)

    @property
    def resumes(self) -> int:
        return sum(t.resumes for t in self.trials)

    @property
    def trial_steps(self) -> int:
        return sum(t.done for t in self.trials)  # in evaluations


class SimStorage(optuna.storages.InMemoryStorage):
    """In memory, with the heartbeat hpo's resume beats (a simulated trial never goes stale)."""

    def record_heartbeat(self, trial_id: int) -> None:
        pass


@lru_cache(maxsize=8)
def _spec(path: Path) -> StudySpec:
    return load_study_spec(path)


class Simulation:
    def __init__(
        self,
        recording: Recording,
        method: Method,
        seed: int,
        workers: int,
        budget_s: float,
        n_trials: int | None,
        costs: Costs,
        enqueue: Sequence[dict[str, Any]] = (),
        study_name: str | None = None,
    ) -> None:
        self.rec, self.method, self.costs = recording, method, costs
        self.budget_s, self.n_trials, self.workers = budget_s, n_trials, workers
        self.spec = _spec(recording.problem.study)
        storage = SimStorage()
        direction = "maximize" if recording.maximize else "minimize"
        # The study's own name: Hyperband assigns brackets from a hash of it and the trial number.
        name = study_name or self.spec.study.name
        optuna.create_study(storage=storage, study_name=name, direction=direction)
        self.studies = [
            optuna.load_study(
                study_name=name,
                storage=storage,
                sampler=method.sampler_for(self.spec, seed, w),
                pruner=method.pruner_object(self.spec),
            )
            for w in range(workers)
        ]
        for (
            params
        ) in enqueue:  # as a study file's `enqueue:`: asked before the sampler draws (hpo: ask_queued)
            self.studies[0].enqueue_trial(dict(params))
        self.levels = list(method.levels or recording.problem.asha_levels)
        self.brackets = [list(levels) for levels in method.brackets] or [self.levels]
        # (time, sequence, worker, trial): the end of the trial's next evaluation; trial None: the worker is free
        # (a pause's save and exit are done), so it claims work at that moment, with the rung tables of that moment.
        self.events: list[tuple[float, int, int, SimTrial | None]] = []
        self.sequence = 0
        self.idle: list[tuple[int, float]] = []  # (worker, since)
        self.busy_since: dict[int, float] = {}
        self.out = Outcome()

    # ---- the clock ------------------------------------------------------------------------------------------------
    def run(self) -> Outcome:
        for worker in range(self.workers):
            self.free(worker, 0.0)
        while self.events:
            at, _, worker, trial = heapq.heappop(self.events)
            if at > self.budget_s:
                self.out.end_s = self.budget_s
                break
            if trial is None:
                self.free(worker, at)
            else:
                self.evaluated(worker, trial, at)
            self.wake_idle(at)
        else:  # nothing left to run before the budget: every worker idle
            self.out.end_s = max([since for _, since in self.idle], default=0.0)
        for _worker, since in self.busy_since.items():
            self.out.busy_s += max(0.0, min(self.out.end_s, self.budget_s) - since)
        return self.out

    def schedule(self, worker: int, trial: SimTrial, at: float) -> None:
        """The trial's next evaluation ends one recorded segment after `at`."""
        self.push(at + self.rec.curves[trial.config].segment_s[trial.done], worker, trial)

    def push(self, at: float, worker: int, trial: SimTrial | None) -> None:
        heapq.heappush(self.events, (at, self.sequence, worker, trial))
        self.sequence += 1

    def free(self, worker: int, at: float) -> None:
        if worker in self.busy_since:
            self.out.busy_s += at - self.busy_since.pop(worker)
        if not self.claim(worker, at):
            self.idle.append((worker, at))

    def wake_idle(self, at: float) -> None:
        """ASHA with n_trials: a worker with nothing to do waits for a running trial to reach a rung."""
        waiting, self.idle = self.idle, []
        for worker, since in waiting:
            if not self.claim(worker, at):
                self.idle.append((worker, since))

    # ---- a free worker's next piece of work (hpo.scheduling.promotion.claim_work for ASHA) ----------------------
    def claim(self, worker: int, at: float) -> bool:
        if self.method.asha:
            self.end_hopeless(at)
            promotion = self.next_promotion()
            if promotion is not None:
                self.resume(worker, self.by_number(promotion.number), at)
                return True
        if self.n_trials is not None and len(self.out.trials) >= self.n_trials:
            return False
        self.start(worker, at)
        return True

    @property
    def method_eta(self) -> int:
        return self.rec.problem.eta

    def levels_of(self, number: int) -> list[int]:
        return self.brackets[number % len(self.brackets)]

    def next_promotion(self) -> Any:
        """The rule in each bracket; of their choices, the one at the highest rung level (the lower bracket on a tie)."""
        best, level = None, -1
        for bracket, levels in enumerate(self.brackets):
            table = self.table(bracket)
            found = next_promotion(
                table, len(levels), self.method_eta, self.rec.maximize, self.method.underfilled
            )
            if found is not None and levels[found.rung] > level:
                best, level = found, levels[found.rung]
        return best

    def start(self, worker: int, at: float) -> None:
        study = self.studies[worker]
        # as hpo's claim: an `enqueue:` point first, else the sampler's (study.ask() would pop a paused trial)
        trial = ask_queued(study) or ask_new(study)
        params = sample_params(trial, self.spec.search_space)
        config = self.rec.nearest(params, taken=self.out.started)  # each configuration once (recording.py)
        # the trial's own clock starts at its claim, after the part of the start spent before it
        sim = SimTrial(len(self.out.trials), trial, config, started_at=at + self.costs.start_outside_s)
        if self.method.asha:
            sim.rung = RungTrial(sim.number, running=True)
        self.out.trials.append(sim)
        self.out.started.append(config)
        self.busy_since[worker] = at
        self.schedule(worker, sim, at + self.costs.start_s + self.rec.curves[config].setup_s)

    def resume(self, worker: int, sim: SimTrial, at: float) -> None:
        assert sim.rung is not None and sim.state == "paused"
        sim.rung.paused, sim.rung.running = False, True
        sim.rung.promoted.add(sim.rung.rung)
        resumed = pause.resume_trial(sim.trial.study, trial_id(sim.trial))  # RUNNING again, as hpo resumes it
        assert resumed is not None
        sim.trial = resumed
        sim.state, sim.resumes = "running", sim.resumes + 1
        self.busy_since[worker] = at
        self.schedule(worker, sim, at + self.costs.resume_s)

    # ---- an evaluation ends ---------------------------------------------------------------------------------------
    def evaluated(self, worker: int, sim: SimTrial, at: float) -> None:
        step = self.rec.steps[sim.done]
        value = self.rec.curves[sim.config].values[sim.done]
        sim.done += 1
        sim.last = value
        improved = sim.best is None or self.rec.better(value, sim.best)
        if improved:
            sim.best = value
        self.out.trace.append((at, value))
        # `save_strategy: best` writes a checkpoint at each new best, after the evaluation's callbacks (the report),
        # whatever the method
        saved = self.costs.save_s if improved else 0.0
        sim.evaluated_at.append(at)
        last = sim.done == len(self.rec.steps)
        if self.method.stops:
            # hpo.trial.pruning: every evaluation is reported and may prune, the last one too, and the trial's
            # length goes with the first report. Without a pruner hpo adds no pruning callback, and reports nothing.
            if sim.done == 1:
                sim.trial.set_user_attr(LENGTH_ATTR, self.rec.problem.steps)
                sim.trial.set_user_attr(FIRST_REPORT_ATTR, at - sim.started_at)
            elif sim.done == 2 and not sim.resumes:
                sim.trial.set_user_attr(EVALUATION_ATTR, at - sim.evaluated_at[0])
            sim.trial.report(value, step)
            at += self.costs.report_s + saved  # the write and the pruner's call, then the checkpoint
            saved = 0.0
            if sim.trial.should_prune():
                self.tell(sim, TrialState.PRUNED, value, at)
                self.free(worker, at)
                return
        at += saved
        if last:
            score = sim.best if self.rec.objective == "best" else value
            self.tell(sim, TrialState.COMPLETE, score, at)
            self.free(worker, at)
        elif self.method.asha:
            self.at_rung_or_on(worker, sim, step, value, at)
        else:
            self.schedule(worker, sim, at)

    def at_rung_or_on(self, worker: int, sim: SimTrial, step: int, value: float, at: float) -> None:
        """hpo.scheduling.promotion.rung_decider: record the rung value, then train on in place only when the rule
        would promote this trial right now if it paused."""
        levels = self.levels_of(sim.number)
        if step not in levels:
            self.schedule(worker, sim, at)
            return
        assert sim.rung is not None
        rung = levels.index(step)
        sim.rung.values[rung] = value
        sim.trial.report(value, step)
        gate = self.method.gate
        if gate is not None and not gate.is_open(self.gate_pairs(rung, sim.number)):
            sim.rung.promoted.add(rung)  # not judged: on as if promoted (promotion.rung_decider)
            self.schedule(worker, sim, at)
            return
        sim.rung.paused, sim.rung.running = True, False
        choice = self.next_promotion()
        if self.method.in_place and choice is not None and choice.number == sim.number:
            sim.rung.paused, sim.rung.running = False, True
            sim.rung.promoted.add(rung)
            self.schedule(worker, sim, at)
            return
        sim.state = "paused"
        # WAITING in the storage, as hpo pauses it: what a sampler sees of a paused trial is what it would see in a run
        checkpoint = f"sim/trial-{sim.number}/checkpoint-{step}"
        pause.pause_trial(sim.trial.study, trial_id(sim.trial), step=step, checkpoint=checkpoint, value=value)
        self.push(at + self.costs.pause_s, worker, None)

    def gate_pairs(self, rung: int, number: int = 0) -> list[tuple[float, float]]:
        """promotion.gate_pairs over the simulated trials: (value at the rung, score) of every completed trial of
        trial `number`'s bracket."""
        bracket = number % len(self.brackets)
        return [
            (t.rung.values[rung], t.score)
            for t in self.out.trials
            if t.state == "complete"
            and t.score is not None
            and t.rung is not None
            and rung in t.rung.values
            and t.number % len(self.brackets) == bracket
        ]

    def end_hopeless(self, at: float) -> None:
        """With n_trials, paused trials that can never be promoted end PRUNED at their rung (told to the sampler)."""
        if self.n_trials is None:
            return
        remaining = max(0, self.n_trials - len(self.out.trials))
        # per bracket, as if every configuration still to come joined it: never too many out
        outs = [
            out
            for bracket in range(len(self.brackets))
            for out in hopeless(
                self.table(bracket), self.method_eta, self.rec.maximize, remaining, self.method.underfilled
            )
        ]
        for out in outs:
            sim = self.by_number(out.number)
            assert sim.rung is not None
            sim.rung.paused = False
            self.tell(sim, TrialState.PRUNED, sim.rung.values[sim.rung.rung], at)

    def tell(self, sim: SimTrial, state: TrialState, value: float, at: float) -> None:
        sim.state = "complete" if state == TrialState.COMPLETE else "pruned"
        sim.ended_at = at
        if sim.rung is not None:
            sim.rung.running = False
        values = value if math.isfinite(value) else None
        if (
            sim.state == "pruned" and sim.rung is not None and sim.rung.values
        ):  # a paused trial ended at its rung
            pause.end_paused_trial(sim.trial.study, trial_id(sim.trial), state, values)
        elif state == TrialState.COMPLETE:
            sim.score = values
            sim.trial.study.tell(sim.trial, values)
        else:
            sim.trial.study.tell(sim.trial, state=TrialState.PRUNED)

    def table(self, bracket: int | None = None) -> list[RungTrial]:
        """The rung table of one bracket (None: every trial, when there is one bracket)."""
        return [
            t.rung
            for t in self.out.trials
            if t.rung is not None and (bracket is None or t.number % len(self.brackets) == bracket)
        ]

    def by_number(self, number: int) -> SimTrial:
        return self.out.trials[number]


def simulate(
    recording: Recording,
    method: Method,
    seed: int,
    *,
    workers: int | None = None,
    budget_s: float | None = None,
    n_trials: int | None = None,
    costs: Costs | None = None,
    enqueue: Sequence[dict[str, Any]] = (),
    study_name: str | None = None,
) -> Outcome:
    """`budget_s` defaults to the problem's wall budget (`budget_of`); `n_trials` None: configurations until the
    budget is spent (as `hpo run --timeout`)."""
    problem = recording.problem
    return Simulation(
        recording,
        method,
        seed,
        workers or problem.workers,
        budget_s if budget_s is not None else budget_of(recording),
        n_trials,
        costs or Costs.of(recording),
        enqueue,
        study_name,
    ).run()


def budget_of(recording: Recording) -> float:
    """The study's wall budget: its n_trials configurations trained to the end on its workers, each at the median
    recorded cost of a full trial plus the start cost. What the study as shipped would take without early stopping."""
    problem = recording.problem
    full = sorted(recording.full_trial_s())[len(recording.curves) // 2] + problem.start_s
    return problem.n_trials * full / problem.workers
