"""The rung rule a study's recorded rung values were taken under, kept with the study and checked when it is opened
again.

Why: a stop-type rung rule records each trial's value at rung n under `completed_rung_<n>` (hpo.storage.stop_rungs,
Optuna's successive halving and Hyperband), and later trials are judged against those values as if they were taken
where the rule now puts rung n. A study file whose rungs changed between two runs of one study (another
`min_resource`, `reduction_factor` or `keep`, or hpo's default ASHA rungs, which moved on 2026-12-02) would compare a
trial at its first evaluation with values others had at a ninth of their length, and stop the wrong trials without a
word. So the rule a study begins under is stored with it (`RULE_ATTR`), and a run whose file gives another is refused
naming the field, as a changed direction is.

Promotion-type ASHA keeps each trial's value at the points it paused at (hpo.storage.pause's boundaries) and ranks
the trials at a rung by the values recorded at that rung's level: a file whose levels moved (another `min_resource`,
`max_resource`, `reduction_factor` or `max_rungs`) would leave the paused trials at levels that are no rung any more,
never promoted nor ended. Its rule is the levels, stored and compared the same way.

PBT's members pause and are scored at every `perturbation_interval` up to `max_resource`, and an interval's decisions
wait until every live member has a score there: a file with another interval would leave the paused members waiting
at steps that are no interval, and another max_resource would stretch the learning-rate schedule of members already
part-way through it. Its rule is the two, stored and compared the same way.

A study begun before the rule was stored has none: its recorded values are checked against what the file's rungs
would have recorded (for stop-type rungs the value each trial reported at each of its rungs, for promotion-type ones
the points it paused at), and a study whose checked trials disagree is refused the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpo.errors import ConfigError
from hpo.spec.study import StudySpec
from hpo.storage.attempts import REQUEUED_FROM
from hpo.storage.boundaries import boundaries
from hpo.storage.stop_rungs import RUNG_KEY, StopRungsPruner

# Study system attribute: `rung_rule(spec)` (JSON) of the run that first recorded a rung.
RULE_ATTR = "hpo:rung_rule"
LEGACY_SAMPLE = 20  # recorded trials checked in a study begun before the rule was stored (the latest ones)
# Optuna's pruners whose rung values are recorded under RUNG_KEY, and the options that place their rungs.
RUNG_OPTIONS = {
    "successive_halving": ("min_resource", "reduction_factor", "min_early_stopping_rate"),
    "hyperband": ("min_resource", "max_resource", "reduction_factor"),
}


def rung_rule(spec: StudySpec) -> dict[str, Any] | None:
    """What places the study file's rung values (stored as JSON and compared as data, so rewording `describe` does
    not refuse a study); None for a pruner that records none."""
    scheduler = spec.study.scheduler
    if scheduler is not None and scheduler.type == "pbt":
        return {
            "rungs": "pbt",
            "perturbation_interval": scheduler.perturbation_interval,
            "max_resource": scheduler.max_resource,
        }
    if scheduler is not None and spec.stops_at_rungs():
        return {
            "rungs": "stop",
            "first_fraction": scheduler.first_fraction(),
            "reduction_factor": scheduler.reduction_factor,
            "keep": scheduler.keep,
        }
    if scheduler is not None and scheduler.type == "asha":
        return {
            "rungs": "promotion",
            "resource": scheduler.resource,
            "levels": scheduler.promotion_levels(),
            "reduction_factor": scheduler.reduction_factor,
        }
    pruner = spec.study.pruner
    if pruner is None or pruner.type not in RUNG_OPTIONS:
        return None
    return {"rungs": pruner.type, **{name: pruner.options.get(name) for name in RUNG_OPTIONS[pruner.type]}}


def describe(rule: Mapping[str, Any]) -> str:
    """The rule in the words of an error message."""
    if rule.get("rungs") == "promotion":
        levels = ", ".join(str(level) for level in rule["levels"])
        return f"promotion-type rungs at {rule['resource']} {levels}, the top 1/{rule['reduction_factor']} promoted"
    if rule.get("rungs") == "pbt":
        return f"PBT intervals every {rule['perturbation_interval']} steps to {rule['max_resource']}"
    if rule.get("rungs") == "stop":
        return (
            f"stop-type rungs from {rule['first_fraction']:g} of each trial's length (0: its first evaluation), "
            f"each {rule['reduction_factor']} times as far, keep {format_keep(rule['keep'])}"
        )
    options = ", ".join(
        f"{name} {'default' if v is None else v}" for name, v in rule.items() if name != "rungs"
    )
    return f"Optuna's {rule.get('rungs')} pruner: {options}"


def format_keep(keep: float | str) -> str:
    return f"{keep:g}" if isinstance(keep, int | float) else str(keep)


def check_rung_rule(
    study: optuna.Study, spec: StudySpec, pruner: optuna.pruners.BasePruner, where: str
) -> None:
    """Store the file's rung rule with a study that has recorded no rung yet; refuse a run whose rule differs from
    the one the study's rung values were recorded under (ConfigError, exit 2)."""
    rule = rung_rule(spec)
    if rule is None:
        return  # this pruner reads no recorded rung; the stored rule waits for a file that does
    storage, study_id = study._storage, study._study_id  # noqa: SLF001 - Optuna's study-level attributes
    stored = storage.get_study_system_attrs(study_id).get(RULE_ATTR)
    if stored == rule:
        return
    # WAITING: a promotion study's paused trials
    trials = study.get_trials(
        deepcopy=False,
        states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING),
    )
    recorded = [t for t in trials if has_recorded(t, rule)]
    if recorded and stored is not None:
        raise ConfigError(
            f"{field_of(spec)}: the stored study '{spec.study.name}' in {where} recorded its rung values under "
            f"{describe(stored)}; the file now gives {describe(rule)}. Give the rungs the study began with, or use "
            "another study.name or --storage"
        )
    if (
        recorded
        and rule["rungs"] == "promotion"
        and (elsewhere := paused_elsewhere(recorded, rule["levels"]))
    ):
        raise ConfigError(
            f"{field_of(spec)}: the stored study '{spec.study.name}' in {where} recorded rung values at "
            f"{rule['resource']} {', '.join(str(p) for p in elsewhere)}, where the file puts no rung "
            f"({describe(rule)}). Give the rungs it began with, or use another study.name or --storage"
        )
    if recorded and rule["rungs"] == "pbt" and (elsewhere := scored_elsewhere(recorded, spec)):
        raise ConfigError(
            f"study.scheduler: the stored study '{spec.study.name}' in {where} scored its members at steps "
            f"{', '.join(str(step) for step in elsewhere)}, where the file puts no interval ({describe(rule)}). "
            "Give the perturbation_interval and max_resource it began with, or use another study.name or --storage"
        )
    if recorded and recorded_elsewhere(recorded, pruner):
        raise ConfigError(
            f"{field_of(spec)}: the stored study '{spec.study.name}' in {where} recorded its rung values at other "
            f"steps than {describe(rule)}. Give the rungs it began with (hpo's default before 2026-12-02: scheduler: "
            "{type: asha, mode: stop, min_resource: <a ninth of the length>, reduction_factor: 2}), or use another "
            "study.name or --storage"
        )
    storage.set_study_system_attr(study_id, RULE_ATTR, rule)


def field_of(spec: StudySpec) -> str:
    return "study.scheduler" if spec.study.scheduler is not None else "study.pruner"


def has_recorded(trial: FrozenTrial, rule: Mapping[str, Any]) -> bool:
    """Whether the trial holds a value taken under the rule: a stop-type rung value, a promotion pause point, or a
    PBT member's score at an interval (its only intermediate values)."""
    if rule["rungs"] == "promotion":
        return bool(boundaries(trial))
    if rule["rungs"] == "pbt":
        return bool(trial.intermediate_values)
    return f"{RUNG_KEY}0" in trial.system_attrs


def scored_elsewhere(recorded: Sequence[FrozenTrial], spec: StudySpec) -> list[int]:
    """The steps PBT members were scored at that are none of the file's intervals (another interval's)."""
    intervals = set(spec.study.scheduler.intervals())
    return sorted({step for trial in recorded for step in trial.intermediate_values} - intervals)


def paused_elsewhere(recorded: Sequence[FrozenTrial], levels: Sequence[int]) -> list[int]:
    """The points, in the resource's unit, where trials recorded a promotion rung value that are none of `levels`
    (a trial records one only where its rule paused it or let it go on in place, so any such point is another rule's)."""
    return sorted({point for trial in recorded for point in boundaries(trial)} - set(levels))


def recorded_elsewhere(recorded: Sequence[FrozenTrial], pruner: optuna.pruners.BasePruner) -> bool:
    """Whether most of the latest trials that recorded rung values (first attempts only: a retry's reports start
    where it resumed) hold values other than `pruner`'s stop-type rungs would have recorded. Only hpo's own
    stop-type rungs are checked; another pruner's rungs are taken on trust."""
    if not isinstance(pruner, StopRungsPruner):
        return False
    checked = [t for t in recorded if REQUEUED_FROM not in t.user_attrs][-LEGACY_SAMPLE:]
    verdicts = [v for t in checked if (v := agrees(t, pruner)) is not None]
    disagreeing = verdicts.count(False)
    return disagreeing >= 2 and disagreeing > len(verdicts) / 2


def agrees(trial: FrozenTrial, pruner: StopRungsPruner) -> bool | None:
    """Whether each rung value the trial recorded is its report at that rung under `pruner`; None if it cannot tell
    (no length, or a rung past its reports)."""
    first = pruner.first_rung(trial)
    if first is None:
        return None
    steps = sorted(trial.intermediate_values)
    rung = 0
    while (key := f"{RUNG_KEY}{rung}") in trial.system_attrs:
        at = next((step for step in steps if step >= first * pruner.reduction_factor**rung), None)
        if at is None:
            return None
        if trial.intermediate_values[at] != trial.system_attrs[key]:
            return False
        rung += 1
    return True
