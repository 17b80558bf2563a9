"""The best trial of a one-objective study, chosen one way everywhere: by value, and among equal values the lowest
trial number. Optuna's `study.best_trial` leaves ties to the database's row order, so export, `hpo status` and
retention (`study.keep_checkpoints`) could each name a different trial of a tie, and export refused when retention
had kept the other one's checkpoint (tests/chaos/campaign.py seed 944984)."""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial, TrialState


def ranked_complete(study: optuna.Study, trials: list[FrozenTrial] | None = None) -> list[FrozenTrial]:
    """COMPLETE trials of a one-objective study, best first; ties in the order the trials were created."""
    trials = study.get_trials(deepcopy=False) if trials is None else trials
    complete = [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None]
    maximize = study.direction == optuna.study.StudyDirection.MAXIMIZE
    return sorted(complete, key=lambda t: (-t.value if maximize else t.value, t.number))


def best_complete_trial(study: optuna.Study, trials: list[FrozenTrial] | None = None) -> FrozenTrial | None:
    """The best COMPLETE trial of a one-objective study (the lowest number among ties); None when none completed."""
    ranked = ranked_complete(study, trials)
    return ranked[0] if ranked else None
