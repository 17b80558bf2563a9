"""The values a promotion-type trial reported at its rung points, kept with the trial as a system attribute.

Apart from hpo.storage.pause (which writes them) so that the study's opening checks (hpo.storage.rung_rule, imported
by hpo.storage.study_db, which pause imports) can read them without a circle.
"""

from __future__ import annotations

from optuna.trial import FrozenTrial

BOUNDARIES = "hpo:boundaries"


def boundaries(trial: FrozenTrial) -> dict[int, float]:
    """The values a trial reported at pause points, by the point (in the scheduler's resource unit)."""
    return {int(step): float(value) for step, value in (trial.system_attrs.get(BOUNDARIES) or {}).items()}
