"""What a study has to show: its trials' states and values, and its best trial or Pareto front (`hpo run`, `hpo status`,
`hpo best`, `hpo.run_study`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpo.spec import StudySpec
from hpo.storage.best import best_complete_trial
from hpo.storage.lineage import current_params
from hpo.storage.urls import redact


@dataclass
class TrialSummary:
    number: int
    state: str
    values: list[float] | None
    params: dict[str, Any]
    best_step: int | None = None
    best_checkpoint: str | None = None
    run_dir: str | None = None
    pruned_step: int | None = None
    duration_s: float | None = None
    error: str | None = None

    @classmethod
    def of(cls, trial: FrozenTrial) -> TrialSummary:
        attrs = trial.user_attrs
        duration = attrs.get("duration_s")
        if duration is None and trial.datetime_start and trial.datetime_complete:
            duration = (trial.datetime_complete - trial.datetime_start).total_seconds()
        return cls(
            number=trial.number,
            state=trial.state.name,
            values=list(trial.values) if trial.values is not None else None,
            params=current_params(
                trial
            ),  # a PBT member's latest values (what its weights were last trained with)
            best_step=attrs.get("best_step"),
            best_checkpoint=attrs.get("best_checkpoint"),
            run_dir=attrs.get("run_dir"),
            pruned_step=attrs.get("pruned_step"),
            duration_s=duration,
            error=attrs.get("error"),
        )


@dataclass
class StudySummary:
    study_name: str
    storage: str
    directions: list[str]
    metrics: list[str]
    counts: dict[str, int]
    best_trials: list[TrialSummary] = field(default_factory=list)
    duration_s: float | None = None

    @property
    def best_trial(self) -> TrialSummary | None:
        """The best trial (one objective), or the first of the Pareto front."""
        return self.best_trials[0] if self.best_trials else None

    @property
    def best_value(self) -> float | None:
        best = self.best_trial
        return best.values[0] if best and best.values else None

    @property
    def n_trials(self) -> int:
        return sum(self.counts.values())


def summarize(
    spec: StudySpec, study: optuna.Study, storage: str | None = None, duration_s: float | None = None
) -> StudySummary:
    trials = study.get_trials(deepcopy=False)
    counts = {state.name: sum(t.state == state for t in trials) for state in TrialState}
    # A trial failed and queued again (interrupted, crashed, out of GPU memory beside others) is not a failed trial:
    # its retry is the trial that counts.
    counts["REQUEUED"] = sum(
        t.state == TrialState.FAIL and bool(t.user_attrs.get("requeued")) for t in trials
    )
    counts["FAIL"] -= counts["REQUEUED"]
    return StudySummary(
        study_name=study.study_name,
        storage=redact(str(storage or spec.storage)),
        directions=list(spec.study.directions or []),
        metrics=list(spec.study.metrics or []),
        counts={k: v for k, v in counts.items() if v},
        best_trials=[TrialSummary.of(t) for t in best_trials(study)],
        duration_s=duration_s,
    )


def best_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The best trial in a list, or the Pareto front ordered by the first objective; empty when none completed."""
    if len(study.directions) == 1:
        best = best_complete_trial(study)
        return [best] if best is not None else []
    if not study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        return []
    first_max = study.directions[0] == optuna.study.StudyDirection.MAXIMIZE
    return sorted(study.best_trials, key=lambda t: t.values[0], reverse=first_max)
