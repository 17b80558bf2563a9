"""What `hpo status` shows of an ASHA study: trials per rung (reached, paused, promoted, whether its rank gate lets it
judge yet), each trial's path through the rungs, and what a promotion costs (pause: save + exit; resume: restart +
restore)."""

from __future__ import annotations

from statistics import mean
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpo.scheduling.asha import rung_counts
from hpo.scheduling.promotion import AshaPlan, gate_pairs, rung_table
from hpo.scheduling.rank_gate import spearman
from hpo.spec import StudySpec
from hpo.storage import pause


def rung_rows(study: optuna.Study, spec: StudySpec) -> list[dict[str, Any]]:
    """One row per pause rung: its resource level and how many trials reached it, are paused there, went on."""
    plan = AshaPlan.of(spec)
    if plan is None:
        return []
    counts = rung_counts(rung_table(study, plan), len(plan.levels))
    trials = study.get_trials(deepcopy=False)
    rows = [
        {**row, "level": plan.levels[row["rung"]], "gate": gate_state(plan, trials, plan.levels[row["rung"]])}
        for row in counts
    ]
    finished = sum(
        1
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if t.user_attrs.get("global_step")
    )
    assert spec.study.scheduler is not None and spec.study.scheduler.max_resource is not None
    rows.append(
        {
            "rung": len(plan.levels),
            "level": spec.study.scheduler.max_resource,
            "reached": finished,
            "paused": 0,
            "promoted": 0,
            "gate": "",
        }
    )
    return rows


def gate_state(plan: AshaPlan, trials: list[FrozenTrial], point: int) -> str:
    """`open: 0.82 over 9`, `closed: 0.41 over 9` or `closed: 3 of 8 pairs`; `off` without a gate."""
    if plan.gate is None:
        return "off"
    pairs = gate_pairs(trials, point)
    if len(pairs) < plan.gate.min_pairs:
        return f"closed: {len(pairs)} of {plan.gate.min_pairs} pairs"
    word = "open" if plan.gate.is_open(pairs) else "closed"
    return f"{word}: {spearman(pairs):.2f} over {len(pairs)}"


def trial_path(trial: FrozenTrial) -> str:
    """`4: 0.53 > 8: 0.80 (paused)`: the value at each pause point passed, and where the trial stands."""
    steps = [f"{point}: {value:.4g}" for point, value in sorted(pause.boundaries(trial).items())]
    if pause.is_paused(trial):
        steps.append("(paused)")
    return " > ".join(steps) or "-"


def state_label(trial: FrozenTrial) -> str:
    return "PAUSED" if pause.is_paused(trial) else trial.state.name


def promotion_overhead(trials: list[FrozenTrial]) -> dict[str, float] | None:
    """Mean seconds per promotion: pausing (checkpoint, process exit, database) and resuming (claim, fork, data,
    model, checkpoint restore, up to the first step); None before any promotion."""
    saves = [p["save_exit_s"] for t in trials for p in t.user_attrs.get("pauses") or [] if "save_exit_s" in p]
    restores = [
        r["restart_restore_s"]
        for t in trials
        for r in t.user_attrs.get("resumes") or []
        if "restart_restore_s" in r
    ]
    if not restores:
        return None
    return {
        "pause_s": round(mean(saves), 3) if saves else 0.0,
        "resume_s": round(mean(restores), 3),
        "promotions": len(restores),
    }
