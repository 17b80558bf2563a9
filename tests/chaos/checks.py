"""The invariants a study must hold after any fault, once the harness has run it to the end (tests/chaos/campaign.py).

Each check returns violations as one line each; an empty list is a pass. They read what a user could read: the study's
storage, the experiment store, the output folder, and an export of the best model.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpo.errors import HpoError
from hpo.export.write import export_study
from hpo.scheduling.pbt import DECIDED
from hpo.spec import StudySpec
from hpo.spec.scheduler import rung_levels
from hpo.storage import pause
from hpo.storage.database import create_storage
from hpo.storage.retention import checkpoints_in
from hpo.storage.stop_rungs import LENGTH_ATTR, RUNG_KEY, StopRungsPruner
from hpo.storage.study_db import pick_trial, storage_url
from hpo.tracking.events import store_location
from hpo.tracking.store import open_store, trial_run_id

FINAL = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
STORE_STATUS = {TrialState.COMPLETE: {"completed"}, TrialState.PRUNED: {"pruned"}}
EXPORT_TOLERANCE = 1e-6


def load(spec: StudySpec) -> list[FrozenTrial]:
    study = optuna.load_study(study_name=spec.study.name, storage=create_storage(storage_url(spec)))
    return study.get_trials(deepcopy=False)


def chains(trials: list[FrozenTrial]) -> list[list[FrozenTrial]]:
    """Each configuration's attempts, oldest first: a trial failed and queued again, then its retry, and so on."""
    by_number = {t.number: t for t in trials}
    successor = {
        t.user_attrs["requeued_from_trial"]: t for t in trials if "requeued_from_trial" in t.user_attrs
    }
    starts = [t for t in trials if t.user_attrs.get("requeued_from_trial") not in by_number]
    found = []
    for start in sorted(starts, key=lambda t: t.number):
        chain, seen = [start], {start.number}
        while chain[-1].number in successor and successor[chain[-1].number].number not in seen:
            chain.append(successor[chain[-1].number])
            seen.add(chain[-1].number)
        found.append(chain)
    return found


# ---- the study --------------------------------------------------------------------------------------------------------
def check_states(spec: StudySpec, trials: list[FrozenTrial]) -> list[str]:
    """n_trials exact, every trial in a final state, each configuration ended once, the retry chain intact."""
    problems = [f"trial {t.number} left {t.state.name}" for t in trials if t.state not in FINAL]
    ends = [
        t
        for t in trials
        if t.state in FINAL and not (t.state == TrialState.FAIL and t.user_attrs.get("requeued"))
    ]
    if len(ends) != spec.study.n_trials:
        problems.append(f"{len(ends)} configurations ended, n_trials is {spec.study.n_trials}")
    successors: dict[int, list[int]] = {}
    for trial in trials:
        if "requeued_from_trial" in trial.user_attrs:
            successors.setdefault(int(trial.user_attrs["requeued_from_trial"]), []).append(trial.number)
    by_number = {t.number: t for t in trials}
    for number, retries in successors.items():
        before = by_number.get(number)
        if len(retries) > 1:
            problems.append(f"trial {number} was queued again {len(retries)} times: {retries}")
        if before is None or before.state != TrialState.FAIL or not before.user_attrs.get("requeued"):
            problems.append(
                f"trials {retries} continue trial {number}, which is not a failed, requeued trial"
            )
    for trial in trials:
        if (
            trial.state == TrialState.FAIL
            and trial.user_attrs.get("requeued")
            and trial.number not in successors
        ):
            problems.append(f"trial {trial.number} failed as requeued, but no retry continues it")
        retries = int(trial.user_attrs.get("retry_count", 0))
        if retries > spec.resources.max_retries:
            problems.append(
                f"trial {trial.number}: retry_count {retries} > max_retries {spec.resources.max_retries}"
            )
    return problems


def check_best(spec: StudySpec, trials: list[FrozenTrial]) -> list[str]:
    complete = [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None]
    if not complete:
        return []
    maximize = (spec.study.directions or ["minimize"])[0] == "maximize"
    best = max(t.value for t in complete) if maximize else min(t.value for t in complete)
    study = optuna.load_study(study_name=spec.study.name, storage=create_storage(storage_url(spec)))
    picked = pick_trial(study, spec)
    if picked.value != best:
        return [
            f"the best trial hpo picks ({picked.number}: {picked.value}) is not the best complete one ({best})"
        ]
    return []


def check_asha(spec: StudySpec, trials: list[FrozenTrial]) -> list[str]:
    """Each configuration judged at every rung it reached: promoted from it, or ended PRUNED there; the top 1/eta of
    every rung promoted (or failed), and none of those pruned."""
    scheduler = spec.study.scheduler
    if scheduler is None or scheduler.type != "asha" or not spec.pauses_trials():
        return []
    levels = rung_levels(
        scheduler.min_resource, scheduler.max_resource, scheduler.reduction_factor, scheduler.max_rungs
    )
    eta, problems = scheduler.reduction_factor, []
    reached: dict[int, dict[int, float]] = {}  # configuration (first trial) -> step -> value
    last: dict[int, FrozenTrial] = {}
    for chain in chains(trials):
        values: dict[int, float] = {}
        for attempt in chain:
            values.update(pause.boundaries(attempt))
        reached[chain[0].number], last[chain[0].number] = values, chain[-1]
        end = chain[-1]
        top = max((s for s in values if s in levels), default=None)
        if end.state == TrialState.COMPLETE and set(levels) - set(values):
            problems.append(
                f"trial {end.number} COMPLETE without a value at rungs {sorted(set(levels) - set(values))}"
            )
        if end.state == TrialState.PRUNED and end.user_attrs.get("pruned_step") != top:
            problems.append(
                f"trial {end.number} PRUNED at step {end.user_attrs.get('pruned_step')}, its top rung is {top}"
            )
    maximize = (spec.study.directions or ["minimize"])[0] == "maximize"
    for k, level in enumerate(levels[:-1] if len(levels) > 1 else []):
        ranked = sorted(
            (c for c in reached if level in reached[c] and math.isfinite(reached[c][level])),
            key=lambda c: (-reached[c][level] if maximize else reached[c][level], c),
        )
        top = ranked[: len(ranked) // eta]
        if not top:
            continue
        # Configurations tied at the cutoff: any of them may take the places left (the scheduler breaks a tie by its
        # own order), so only a shortfall among them is a violation.
        cutoff = reached[top[-1]][level]
        tied = [c for c in ranked if reached[c][level] == cutoff]
        places = len(top) - sum(reached[c][level] != cutoff for c in top)

        def owed(config: int, next_level: int = levels[k + 1]) -> bool:
            done = last[config].state in (TrialState.FAIL, TrialState.COMPLETE)
            return not done and next_level not in reached[config]

        unpromoted = [c for c in top if reached[c][level] != cutoff and owed(c)]
        if sum(not owed(c) for c in tied) < places:
            unpromoted += [c for c in tied if owed(c)][: places - sum(not owed(c) for c in tied)]
        for config in unpromoted:
            problems.append(
                f"trial {last[config].number} is in the top 1/{eta} at step {level} but was never promoted"
            )
    return problems


def check_pbt(spec: StudySpec, trials: list[FrozenTrial]) -> list[str]:
    """Every member that completed was scored and decided at every interval."""
    scheduler = spec.study.scheduler
    if scheduler is None or scheduler.type != "pbt":
        return []
    points = scheduler.intervals()[:-1]
    problems = []
    for chain in chains(trials):
        end = chain[-1]
        if end.state != TrialState.COMPLETE:
            continue
        decided = set(end.system_attrs.get(DECIDED) or [])
        scored = set().union(*(a.intermediate_values for a in chain))
        if set(points) - scored:
            problems.append(f"member trial {end.number}: no score at steps {sorted(set(points) - scored)}")
        if set(points) - decided:
            problems.append(
                f"member trial {end.number}: no decision at steps {sorted(set(points) - decided)}"
            )
    return problems


# What a trial's error says when the storage or the object store did not answer: such a failure is an outage's, and
# a configuration that ended FAIL for it is lost (it should have waited, or been queued again).
OUTAGE_WORDS = (
    "Could not connect to the endpoint",
    "EndpointConnectionError",
    "Connection refused",
    "server closed the connection",
    "terminating connection",
    "database is locked",
    "OperationalError",
    "unreachable",
)


def check_outage_failures(spec: StudySpec, trials: list[FrozenTrial]) -> list[str]:
    """No configuration ended FAIL because the database or the object store did not answer for a while."""
    return [
        f"trial {t.number} ended FAIL for an outage: {str(t.user_attrs.get('error'))[:160]}"
        for t in trials
        if t.state == TrialState.FAIL
        and not t.user_attrs.get("requeued")
        and any(word in str(t.user_attrs.get("error") or "") for word in OUTAGE_WORDS)
    ]


def check_reports(spec: StudySpec, trials: list[FrozenTrial]) -> list[str]:
    """No report lost: each configuration that ended COMPLETE or PRUNED has, across its attempts, a value at every
    evaluation step up to where it ended (a COMPLETE one to the end of training). A report kept through a storage
    outage and never written shows as a gap; one written twice cannot show here (one value a step), so the store's
    one run per attempt is checked by check_store."""
    every = int(spec.training.get("eval_steps") or 0)
    scheduler = spec.study.scheduler
    if not every or (scheduler is not None and scheduler.type == "asha" and spec.pauses_trials()):
        return []  # promotion ASHA reports at its rungs only: check_asha holds a value at each rung reached
    length = getattr(scheduler, "max_resource", None) or int(spec.training.get("max_steps") or 0)
    if scheduler is not None and scheduler.type == "pbt":  # a member's last value is its result, not a report
        length = max(scheduler.intervals()[:-1], default=0)
    problems = []
    for chain in chains(trials):
        end = chain[-1]
        if end.state not in (TrialState.COMPLETE, TrialState.PRUNED):
            continue
        reported = set().union(*(a.intermediate_values for a in chain))
        last = length if end.state == TrialState.COMPLETE else max(reported, default=0)
        missing = sorted(set(range(every, last + 1, every)) - reported)
        if missing:
            problems.append(f"trial {end.number} ({end.state.name}): no report at steps {missing}")
    return problems


# ---- disk, store, export --------------------------------------------------------------------------------------------
def check_disk(spec: StudySpec, trials: list[FrozenTrial]) -> list[str]:
    """At most keep_checkpoints.top_k checkpoints left, one per kept trial, no half-written ones."""
    top_k = spec.study.keep_checkpoints.top_k
    if top_k is None:
        return []
    left = [c for run in Path(spec.output_dir).glob("trial-*") for c in checkpoints_in(run)]
    problems = [f"a half-written checkpoint is left: {c}" for c in left if c.name.startswith(".")]
    if len(left) > top_k:
        names = ", ".join(str(c.relative_to(spec.output_dir)) for c in left)
        problems.append(f"{len(left)} checkpoints left, keep_checkpoints.top_k is {top_k}: {names}")
    return problems


def check_store(spec: StudySpec, trials: list[FrozenTrial]) -> list[str]:
    """One run row per attempt that started training, its status the trial's, each retry's link to the trial it
    continues recorded."""
    location = store_location(spec)  # on PostgreSQL, the study's own database
    if location is None:
        return ["no experiment store"]
    store = open_store(location)
    try:
        rows = {r["trial_number"]: r for r in store.runs(study_name=spec.study.name)}
        problems = []
        by_number = {t.number: t for t in trials}
        for number, row in sorted(rows.items()):
            trial = by_number.get(number)
            if trial is None:
                problems.append(f"store run of trial {number}: no such trial")
                continue
            expected = STORE_STATUS.get(trial.state)
            if trial.state == TrialState.FAIL:
                expected = (
                    {"requeued", "failed", "interrupted"} if trial.user_attrs.get("requeued") else {"failed"}
                )
            if row["status"] not in (expected or set()):
                problems.append(
                    f"store run of trial {number} is {row['status']!r}, the trial is {trial.state.name}"
                )
            if trial.state == TrialState.COMPLETE and row["objective"] != trial.value:
                problems.append(
                    f"store run of trial {number}: objective {row['objective']}, the trial's {trial.value}"
                )
            previous = trial.user_attrs.get("requeued_from_trial")
            if previous is not None:
                # Only the retry's own event names the trial it continues; the worker's "retried" on this run (it
                # was queued again in its turn, hpo/scheduling/worker.py) names none.
                linked = [
                    e["data"]["requeued_from_trial"]
                    for e in store.events(trial_run_id(spec.study.name, number), kind="retried")
                    if "requeued_from_trial" in (e["data"] or {})
                ]
                if linked != [previous]:
                    problems.append(
                        f"store run of trial {number}: retried events {linked}, it continues trial {previous}"
                    )
        for trial in trials:
            if trial.state in (TrialState.COMPLETE,) and trial.number not in rows:
                problems.append(f"trial {trial.number} is COMPLETE but has no store run")
        return problems
    finally:
        store.close()


def check_export(spec: StudySpec, trials: list[FrozenTrial], damaged: set[str] = frozenset()) -> list[str]:
    """`hpo export` of the best trial reloads and scores what training recorded. Where a fault cut short or deleted
    that trial's checkpoints, its model is gone: a refusal in one line (HpoError) is then the right answer."""
    if not any(t.state == TrialState.COMPLETE for t in trials):
        return []
    metric = f"eval_{spec.study.metrics[0]}" if spec.study.metrics else "eval_loss"
    with tempfile.TemporaryDirectory() as out:
        try:
            result = export_study(spec, Path(out) / "export")
        except HpoError as error:
            if any(f"/{folder}" in str(error) for folder in damaged) and len(str(error).splitlines()) == 1:
                return []
            return [f"hpo export failed: {type(error).__name__}: {error}"]
        except Exception as error:  # noqa: BLE001 - any other failure to export is the finding
            return [f"hpo export failed: {type(error).__name__}: {error}"]
    problems = []
    for name, recorded, reloaded in result.comparison():
        if recorded is None or reloaded is None or abs(recorded - reloaded) > EXPORT_TOLERANCE:
            problems.append(f"export: {name} recorded {recorded}, reloaded {reloaded}")
    best = pick_trial(
        optuna.load_study(study_name=spec.study.name, storage=create_storage(storage_url(spec))), spec
    )
    recorded = result.recorded.get(
        metric, result.recorded.get(spec.study.metrics[0] if spec.study.metrics else "")
    )
    if recorded is not None and best.value is not None and abs(recorded - best.value) > EXPORT_TOLERANCE:
        problems.append(
            f"export: the checkpoint shipped scored {recorded}, the best trial's value is {best.value}"
        )
    return problems


def check_stop_rungs(spec: StudySpec, trials: list[FrozenTrial]) -> list[str]:
    """Stop-type ASHA (a study that names no pruner): each configuration that reported wrote its length, and one
    that ended PRUNED was judged at one of its rungs (its first report at or past the first fraction of that length,
    or reduction_factor^k times that step) with the value it had there, even when its reports reached the storage
    late or a retry resumed past the rung, and stopped at or past that rung."""
    scheduler = spec.study.scheduler
    if scheduler is None or not spec.stops_at_rungs():
        return []
    pruner = StopRungsPruner(scheduler.first_fraction(), scheduler.reduction_factor or 2)
    problems = []
    for chain in chains(trials):
        end = chain[-1]
        reports = {step: v for attempt in chain for step, v in attempt.intermediate_values.items()}
        lengths = {a.user_attrs[LENGTH_ATTR] for a in chain if LENGTH_ATTR in a.user_attrs}
        if reports and not lengths:
            problems.append(f"trial {end.number} reported but never wrote its length ({LENGTH_ATTR})")
            continue
        if end.state != TrialState.PRUNED or not lengths:
            continue
        problems += _judged_at_a_rung(pruner, chain, reports, max(lengths))
    return problems


def _judged_at_a_rung(
    pruner: StopRungsPruner, chain: list[FrozenTrial], reports: dict[int, float], length: int
) -> list[str]:
    """The chain as one trial (a retry writes the reports its predecessor lost), as the pruner reads a trial: its
    highest recorded rung holds the value of the first report at or past that rung, and it stopped there or later."""
    end = chain[-1]
    as_one = SimpleNamespace(user_attrs={LENGTH_ATTR: length}, intermediate_values=reports)
    first = pruner.first_rung(as_one)  # type: ignore[arg-type]
    recorded = {k: v for attempt in chain for k, v in attempt.system_attrs.items() if k.startswith(RUNG_KEY)}
    if first is None or not recorded:
        return [f"trial {end.number} PRUNED without a rung judging it"]
    top = max(int(key.removeprefix(RUNG_KEY)) for key in recorded)
    rung_step = first * pruner.reduction_factor**top
    reached = min((step for step in reports if step >= rung_step), default=None)
    step = end.user_attrs.get("pruned_step")
    if reached is None or recorded[f"{RUNG_KEY}{top}"] != reports[reached]:
        return [f"trial {end.number}: rung {top} (step {rung_step}) holds a value it did not report there"]
    if step is None or step < rung_step:
        return [f"trial {end.number} PRUNED at step {step}, before its rung at step {rung_step}"]
    return []


CHECKS: dict[str, Callable[[StudySpec, list[FrozenTrial]], list[str]]] = {
    "states": check_states,
    "best": check_best,
    "asha": check_asha,
    "stop rungs": check_stop_rungs,
    "pbt": check_pbt,
    "reports": check_reports,
    "outages": check_outage_failures,
    "disk": check_disk,
    "store": check_store,
    "export": check_export,
}


def check_all(spec: StudySpec, damaged: set[str] = frozenset()) -> list[str]:
    """Every invariant; `damaged`: the trial folders whose checkpoints a fault destroyed (their export may refuse)."""
    trials = load(spec)
    problems = []
    for name, check in CHECKS.items():
        try:
            found = check_export(spec, trials, damaged) if check is check_export else check(spec, trials)
            problems += [f"{name}: {line}" for line in found]
        except Exception as error:  # noqa: BLE001 - a check that cannot run is reported, the others still run
            problems.append(f"{name}: the check itself failed: {type(error).__name__}: {error}")
    return problems
