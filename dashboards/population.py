"""A PBT study's population for the study page: each member's score by interval with its copies marked, and the
winning member's hyperparameter schedule (the one `hpo retrain --replay` trains).

    {"members": [{"member": 3, "trials": [3, 9], "scores": [[10, 0.81], ...], "copies": [[20, 0]]}, ...],
     "winner": {"member": 3, "trial": 9, "schedule": [{"step": 0, "params": {...}, "member": 0, "copied_from": null}]}}

None for a study whose trials are not PBT members.
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from dashboards.serialize import plain, rounded
from hpo.storage.lineage import (
    MEMBER,
    as_records,
    latest_by_member,
    member_of,
    member_scores,
    members,
    schedule,
)
from hpo.storage.lineage import segments as lineage_segments


def population(study: optuna.Study, trials: list[FrozenTrial]) -> dict[str, Any] | None:
    if not any(MEMBER in trial.user_attrs for trial in trials):
        return None
    latest = latest_by_member(trials)
    rows = []
    for number, chain in sorted(members(trials).items()):
        scores = sorted(member_scores(chain).items())
        copies = [[s.step, s.source] for s in lineage_segments(latest[number]) if s.source is not None]
        rows.append(
            {
                "member": number,
                "trials": [t.number for t in chain],
                "state": chain[-1].state.name,
                "scores": [[step, rounded(value)] for step, value in scores],
                "copies": copies,
            }
        )
    return {"members": rows, "winner": _winner(study, trials, latest)}


def _winner(
    study: optuna.Study, trials: list[FrozenTrial], latest: dict[int, FrozenTrial]
) -> dict[str, Any] | None:
    complete = [t for t in trials if t.state == TrialState.COMPLETE and t.values]
    if not complete or len(study.directions) != 1:
        return None
    maximize = study.directions[0] == optuna.study.StudyDirection.MAXIMIZE
    best = (max if maximize else min)(complete, key=lambda t: t.values[0])
    member = member_of(best, {t.number: t for t in trials})
    return {
        "member": member,
        "trial": best.number,
        "value": plain(best.values[0]),
        "schedule": plain(as_records(schedule(latest, member))),
    }
