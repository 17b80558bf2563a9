"""Turn Optuna trials and studies into plain JSON-ready dicts for the pages.

Non-finite floats become None (JSON has no NaN), datetimes become unix seconds, and anything else that JSON cannot hold
becomes its `repr`, so a strange user attribute can never break a page.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState

from hpo.storage.lineage import current_params

# The user attributes the study page uses (table columns, timeline lanes); the trial page fetches all of them. Keeping
# the others (final_metrics, tracebacks, paths) out makes a 10,000-trial study's answer several MB lighter.
STUDY_PAGE_USER_ATTRS = ("slot", "host", "devices", "error", "pruned_step")
# What hpo.storage.pause writes on trials of a study with a pausing scheduler (ASHA): read here by name, since the
# dashboards import nothing of hpo's storage layer.
PAUSED_ATTR, BOUNDARIES_ATTR = "hpo:paused", "hpo:boundaries"
# What hpo.storage.retry writes on a FAIL trial whose parameters it queued again (interrupted, crashed, out of GPU
# memory beside other trials): its retry is the trial that counts, so the pages show it as REQUEUED, not FAIL.
REQUEUED_ATTR, REQUEUED = "requeued", "REQUEUED"
# Plots need no more digits than this; the trial page has the exact values.
PLOT_DIGITS = 6


def plain(value: Any) -> Any:
    """A JSON-safe copy of `value`."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, datetime):
        return value.timestamp()
    return repr(value)


def timestamp(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None


def rounded(value: float) -> float | None:
    return plain(float(f"{value:.{PLOT_DIGITS}g}")) if value is not None else None


def trial_to_json(trial: FrozenTrial, *, full: bool = False) -> dict[str, Any]:
    """One trial. `full=False` (the study page) keeps the user attributes it shows and rounds intermediate values."""
    if full:
        user_attrs = trial.user_attrs
        intermediate = [[step, plain(value)] for step, value in sorted(trial.intermediate_values.items())]
    else:
        user_attrs = {k: v for k, v in trial.user_attrs.items() if k in STUDY_PAGE_USER_ATTRS}
        intermediate = [[step, rounded(value)] for step, value in sorted(trial.intermediate_values.items())]
    # A PBT member's params are the values it trains with now (its lineage), as `hpo status` shows them.
    start, end = timestamp(trial.datetime_start), timestamp(trial.datetime_complete)
    rungs = rung_path(trial)
    extra = {"rungs": rungs, "paused": is_paused(trial)} if rungs else {}
    return {
        **extra,
        "number": trial.number,
        "state": shown_state(trial),
        "values": plain(trial.values),
        "params": plain(current_params(trial)),
        "intermediate": intermediate,
        "start": start,
        "end": end,
        "duration": duration(trial, start, end),
        "pieces": pieces(trial, start, end),
        "user_attrs": plain(user_attrs),
    }


def duration(trial: FrozenTrial, start: float | None, end: float | None) -> float | None:
    """The trial's training time as it recorded it (every piece of a paused and resumed trial: ASHA, PBT); else the
    span of its start and end in the database, which a resume moves to the last piece."""
    recorded = trial.user_attrs.get("duration_s")
    if isinstance(recorded, (int, float)) and trial.state.is_finished():
        return plain(float(recorded))
    return (end - start) if start is not None and end is not None else None


def pieces(trial: FrozenTrial, start: float | None, end: float | None) -> list[list[float | None]]:
    """[[start, end], ...]: each piece of training, oldest first. A paused and resumed trial (ASHA, PBT) records each
    piece that ended in a pause (`pauses`, written by the worker); its current piece runs from its start in the
    database (which a resume moves) to its end, or is open (end None) while it runs. A trial that ended while
    paused (PRUNED at its rung) has no current piece: its start is still its last recorded piece's."""
    recorded = [
        [float(p["start"]), float(p["end"])]
        for p in trial.user_attrs.get("pauses") or []
        if isinstance(p, dict)
        and isinstance(p.get("start"), (int, float))
        and isinstance(p.get("end"), (int, float))
    ]
    if start is None or is_paused(trial):
        return recorded
    if recorded and start <= recorded[-1][0] + 1e-3:
        return recorded
    return [*recorded, [start, end]]


def shown_state(trial: FrozenTrial) -> str:
    """The trial's Optuna state, except REQUEUED for a failed attempt whose retry was queued."""
    if trial.state == TrialState.FAIL and trial.user_attrs.get(REQUEUED_ATTR):
        return REQUEUED
    return trial.state.name


def is_paused(trial: FrozenTrial) -> bool:
    return trial.state == TrialState.WAITING and bool(trial.system_attrs.get(PAUSED_ATTR))


def rung_path(trial: FrozenTrial) -> list[list[Any]]:
    """[[pause point, value], ...]: the rungs a trial reached under ASHA, in order (empty without a scheduler)."""
    points = trial.system_attrs.get(BOUNDARIES_ATTR) or {}
    return [
        [int(point), plain(value)] for point, value in sorted(points.items(), key=lambda item: int(item[0]))
    ]


def rung_summary(trials: list[FrozenTrial]) -> list[dict[str, Any]]:
    """Per rung (pause point): trials that reached it, wait paused there, and went on from it."""
    paths = {t.number: [point for point, _ in rung_path(t)] for t in trials}
    points = sorted({point for path in paths.values() for point in path})
    rows = []
    for point in points:
        reached = [t for t in trials if point in paths[t.number]]
        stopped = [
            t
            for t in reached
            if paths[t.number][-1] == point
            and (is_paused(t) or t.state in (TrialState.PRUNED, TrialState.FAIL))
        ]
        paused = sum(1 for t in stopped if is_paused(t))
        rows.append(
            {
                "point": point,
                "reached": len(reached),
                "paused": paused,
                "promoted": len(reached) - len(stopped),
            }
        )
    return rows


def distribution_to_json(name: str, distribution: optuna.distributions.BaseDistribution) -> dict[str, Any]:
    """How a parameter is drawn, so plots pick the right axis (log, categorical)."""
    if isinstance(distribution, CategoricalDistribution):
        return {"name": name, "type": "categorical", "choices": plain(list(distribution.choices))}
    if isinstance(distribution, (FloatDistribution, IntDistribution)):
        kind = "int" if isinstance(distribution, IntDistribution) else "float"
        return {
            "name": name,
            "type": kind,
            "low": distribution.low,
            "high": distribution.high,
            "log": distribution.log,
        }
    return {"name": name, "type": "unknown"}


def param_specs(trials: list[FrozenTrial]) -> list[dict[str, Any]]:
    """Each parameter seen in the study, with its distribution (the latest trial's, if they differ) and coverage."""
    distributions: dict[str, Any] = {}
    seen: Counter[str] = Counter()
    for trial in trials:
        for name, distribution in trial.distributions.items():
            distributions[name] = distribution
            seen[name] += 1
    return [
        {**distribution_to_json(name, distributions[name]), "trials": seen[name]}
        for name in sorted(distributions)
    ]


def state_counts(trials: list[FrozenTrial]) -> dict[str, int]:
    """Trials by shown state (every Optuna state and REQUEUED, zeros included)."""
    counts = Counter(shown_state(trial) for trial in trials)
    return {state: counts.get(state, 0) for state in [*(s.name for s in TrialState), REQUEUED]}


def running_trials(trials: list[FrozenTrial]) -> list[dict[str, Any]]:
    return [
        {
            "number": trial.number,
            "start": timestamp(trial.datetime_start),
            "slot": plain(trial.user_attrs.get("slot")),
            "devices": plain(trial.user_attrs.get("devices")),
            "host": plain(trial.user_attrs.get("host")),
        }
        for trial in trials
        if trial.state == TrialState.RUNNING
    ]


def best_of(study: optuna.Study, trials: list[FrozenTrial]) -> dict[str, Any]:
    """Single objective: the best trial. Several objectives: the trials on the Pareto front."""
    if not any(trial.state == TrialState.COMPLETE for trial in trials):
        return {"numbers": [], "values": None}
    if len(study.directions) == 1:
        complete = [trial for trial in trials if trial.state == TrialState.COMPLETE]
        pick = min if study.direction == optuna.study.StudyDirection.MINIMIZE else max
        best = pick(complete, key=lambda trial: trial.value)
        return {"numbers": [best.number], "values": plain(best.values)}
    front = sorted(study.best_trials, key=lambda trial: trial.number)
    return {"numbers": [trial.number for trial in front], "values": None}


def objective_names(study: optuna.Study, fallback: list[str] | None = None) -> list[str]:
    """The study's metric names, else the study file's metrics, else generic names."""
    names = study.metric_names or fallback
    if names and len(names) == len(study.directions):
        return list(names)
    if len(study.directions) == 1:
        return ["objective"]
    return [f"objective {index}" for index in range(len(study.directions))]


def study_summary(
    study: optuna.Study, trials: list[FrozenTrial], objectives: list[str] | None = None
) -> dict[str, Any]:
    """What the overview shows for one study."""
    starts = [trial.datetime_start for trial in trials if trial.datetime_start is not None]
    ends = [trial.datetime_complete for trial in trials if trial.datetime_complete is not None]
    return {
        "name": study.study_name,
        "directions": [direction.name.lower() for direction in study.directions],
        "objectives": objective_names(study, objectives),
        "n_trials": len(trials),
        "states": state_counts(trials),
        "best": best_of(study, trials),
        "running": running_trials(trials),
        "rungs": rung_summary(trials),
        "first_start": timestamp(min(starts)) if starts else None,
        "last_activity": timestamp(max(starts + ends)) if starts or ends else None,
    }
